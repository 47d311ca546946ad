package traffic

import (
	"math"
	"slices"
	"time"
)

// Class is the outcome of one request.
type Class string

const (
	// ClassOK: a 2xx answer, fully read; for streams, "data: [DONE]" seen and
	// a finish_reason received.
	ClassOK Class = "ok"
	// ClassConnect: the TCP connection could not be made (refused, no route,
	// DNS).
	ClassConnect Class = "connect"
	// ClassTransport: the connection failed after it was made and before an
	// HTTP status arrived (reset, closed without answer).
	ClassTransport Class = "transport"
	// ClassTimeout: the request ran past Plan.RequestTimeout.
	ClassTimeout Class = "timeout"
	// ClassHTTP4xx: the server answered 400-499; Result.ErrorBody holds the body.
	ClassHTTP4xx Class = "http_4xx"
	// ClassHTTP5xx: the server answered 500-599; Result.ErrorBody holds the body.
	ClassHTTP5xx Class = "http_5xx"
	// ClassHTTPOther: a status below 200 or 300-399 that the client did not follow.
	ClassHTTPOther Class = "http_other"
	// ClassStreamCut: a 200 stream ended before "data: [DONE]", or with
	// [DONE] but no finish_reason on any choice.
	ClassStreamCut Class = "stream_cut"
	// ClassStreamError: a 200 stream carried an error event
	// (data: {"error": {...}}), how vLLM and SGLang report mid-stream failures.
	ClassStreamError Class = "stream_error"
	// ClassMalformedSSE: a stream event was not valid JSON, or the stream sent
	// too many non-data lines in a row.
	ClassMalformedSSE Class = "malformed_sse"
	// ClassMalformedBody: a 2xx non-streaming answer that is not the expected JSON.
	ClassMalformedBody Class = "malformed_body"
	// ClassCanceled: the run's context ended before the request finished (or
	// before it started).
	ClassCanceled Class = "canceled"
	// ClassOther: anything else (kept so that no error goes unrecorded).
	ClassOther Class = "other"
)

// Result is what one request saw. Durations are nanoseconds in JSON.
type Result struct {
	// Index is the request's position in the plan (0-based).
	Index int `json:"index"`
	// Group is the prompt's prefix group (PromptsUnrelated: Index).
	Group int `json:"group"`
	// Stream says whether the request asked for SSE.
	Stream bool `json:"stream"`
	// Class is the outcome; ClassOK for success.
	Class Class `json:"class"`
	// Status is the HTTP status code, 0 when none arrived.
	Status int `json:"status,omitempty"`
	// Error describes a failure in words (empty on success).
	Error string `json:"error,omitempty"`
	// ErrorBody is the start (up to 4 KiB) of a non-2xx answer's body.
	ErrorBody string `json:"error_body,omitempty"`
	// ErrorType, ErrorMessage and ErrorCode come from an OpenAI-style error
	// body, nested {"error":{...}} (vLLM >= 0.10.1, routers) or flat
	// {"object":"error",...} (SGLang), or from a mid-stream error event.
	ErrorType    string `json:"error_type,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	ErrorCode    string `json:"error_code,omitempty"`
	// StartOffset is when the request was sent, from the run's start.
	StartOffset time.Duration `json:"start_offset_ns"`
	// Latency runs from send (the request handed to the transport) to the
	// arrival of the body's last byte (a stream's [DONE] line); for a failed
	// request, from just before the request was built to the failure.
	Latency time.Duration `json:"latency_ns"`
	// TTFT is, for streams, the time from send to the arrival of the first
	// chunk carrying generated text (to the first chunk at all when none
	// carried text), before it is decoded.
	TTFT time.Duration `json:"ttft_ns,omitempty"`
	// Chunks is the number of SSE data events before [DONE].
	Chunks int `json:"chunks,omitempty"`
	// TextChars is the number of characters of generated text received.
	TextChars int `json:"text_chars"`
	// FinishReason is the last finish_reason received.
	FinishReason string `json:"finish_reason,omitempty"`
	// ResponseID is the "id" of the completion (vLLM: chatcmpl-<x-request-id>).
	ResponseID string `json:"response_id,omitempty"`
	// Usage is the token usage the server reported, if any.
	Usage *Usage `json:"usage,omitempty"`
	// Models are the models a GET /v1/models answer listed (its data[]),
	// in order (EndpointModels).
	Models []Model `json:"models,omitempty"`
	// RequestID and InferencePod repeat the x-request-id and x-inference-pod
	// response headers for easy grouping.
	RequestID    string `json:"request_id,omitempty"`
	InferencePod string `json:"inference_pod,omitempty"`
	// ResponseHeaders holds the captured response headers present
	// (lower-case names; see DefaultCaptureHeaders and Plan.CaptureHeaders).
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
	// HeadersSent are the plan headers sent, placeholders expanded.
	HeadersSent map[string]string `json:"headers_sent,omitempty"`
	// SessionParamsSent is the session_params object sent, if any.
	SessionParamsSent map[string]string `json:"session_params_sent,omitempty"`
}

// Model is one entry of a model list.
type Model struct {
	ID      string `json:"id"`
	OwnedBy string `json:"owned_by,omitempty"`
}

// Usage is the token usage an answer reported.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens is usage.prompt_tokens_details.cached_tokens (vLLM with
	// --enable-prompt-tokens-details, SGLang with --enable-cache-report).
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Report is the outcome of Run.
type Report struct {
	// Plan is the plan as run: defaults filled in and the nonce recorded.
	Plan Plan `json:"plan"`
	// Started is when the run began.
	Started time.Time `json:"started"`
	// Results has one entry per request, in index order.
	Results []Result `json:"results"`
	Summary Summary  `json:"summary"`
}

// Summary aggregates results.
type Summary struct {
	Requests int `json:"requests"`
	OK       int `json:"ok"`
	// Failed counts results that are neither OK nor canceled.
	Failed   int `json:"failed"`
	Canceled int `json:"canceled"`
	// ByClass counts results per class.
	ByClass map[Class]int `json:"by_class"`
	// ByStatus counts results per HTTP status (0: no status).
	ByStatus map[int]int `json:"by_status"`
	// ByGroup counts results per prompt group.
	ByGroup map[int]int `json:"by_group"`
	// ByInferencePod counts results per x-inference-pod header value, when
	// the server sent it.
	ByInferencePod map[string]int `json:"by_inference_pod,omitempty"`
	// Latency covers OK results; TTFT covers OK streaming results.
	Latency Stats `json:"latency"`
	TTFT    Stats `json:"ttft"`
	// Wall is the run's wall time.
	Wall time.Duration `json:"wall_ns"`
	// RequestsPerSecond counts every request that was sent (all but those
	// canceled before sending) over Wall; OKPerSecond only OK ones.
	RequestsPerSecond float64 `json:"requests_per_second"`
	OKPerSecond       float64 `json:"ok_per_second"`
}

// Stats are order statistics of durations (nearest-rank percentiles).
type Stats struct {
	Count int           `json:"count"`
	Min   time.Duration `json:"min_ns"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P95   time.Duration `json:"p95_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summarize aggregates results over a run of the given wall time.
func Summarize(results []Result, wall time.Duration) Summary {
	s := Summary{
		Requests: len(results),
		ByClass:  map[Class]int{},
		ByStatus: map[int]int{},
		ByGroup:  map[int]int{},
		Wall:     wall,
	}
	var latencies, ttfts []time.Duration
	sent := 0
	for i := range results {
		r := &results[i]
		s.ByClass[r.Class]++
		s.ByStatus[r.Status]++
		s.ByGroup[r.Group]++
		if r.InferencePod != "" {
			if s.ByInferencePod == nil {
				s.ByInferencePod = map[string]int{}
			}
			s.ByInferencePod[r.InferencePod]++
		}
		if r.Class != ClassCanceled || r.Latency > 0 {
			sent++
		}
		switch r.Class {
		case ClassOK:
			s.OK++
			latencies = append(latencies, r.Latency)
			if r.Stream {
				ttfts = append(ttfts, r.TTFT)
			}
		case ClassCanceled:
			s.Canceled++
		default:
			s.Failed++
		}
	}
	s.Latency = NewStats(latencies)
	s.TTFT = NewStats(ttfts)
	if secs := wall.Seconds(); secs > 0 {
		s.RequestsPerSecond = float64(sent) / secs
		s.OKPerSecond = float64(s.OK) / secs
	}
	return s
}

// NewStats computes Stats of ds (which it sorts in place).
func NewStats(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Stats{
		Count: len(ds),
		Min:   ds[0],
		Mean:  sum / time.Duration(len(ds)),
		P50:   percentile(ds, 0.50),
		P95:   percentile(ds, 0.95),
		P99:   percentile(ds, 0.99),
		Max:   ds[len(ds)-1],
	}
}

// percentile is the nearest-rank percentile of sorted ds: the smallest value
// with at least q of the values at or below it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}
