package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Run sends the plan's requests and returns what each saw. It fails before
// sending anything when the plan is invalid. When ctx ends mid-run, requests
// in flight are abandoned, the rest are not sent, all of them are recorded as
// ClassCanceled, and Run returns the report together with an error wrapping
// ctx.Err(). Run leaves no goroutine or connection behind.
func Run(ctx context.Context, plan Plan) (*Report, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	p := plan.withDefaults()
	if p.Prompts.Nonce == "" {
		p.Prompts.Nonce = newNonce()
	}
	r, err := newRunner(p)
	if err != nil {
		return nil, err
	}
	defer r.httpClient.CloseIdleConnections()

	// The report's plan is what was sent; the progress hook is the
	// caller's display, not part of the run (and a func does not round-trip).
	recorded := p
	recorded.Progress, recorded.ProgressEvery = nil, 0
	report := &Report{Plan: recorded, Results: make([]Result, p.Requests)}
	report.Started = time.Now()
	r.start = report.Started
	// Write the results' fresh memory once, in order, before the workers
	// do. Otherwise the GC's scan of it maps the kernel's shared zero page,
	// and each page's first result then takes a copy-on-write fault with a
	// TLB shootdown across CPUs: ~2us per request on a 2-vCPU VM
	// (bench/driver-vs-peer.sh), against ~0.2us for this loop.
	clear(report.Results)

	var next atomic.Int64
	var wg sync.WaitGroup
	stopProgress := r.progress.start(p, report.Started)
	for range min(p.Concurrency, p.Requests) {
		wg.Go(func() {
			// Each worker's request contexts hang off its own child of ctx,
			// so 64 workers do not contend for ctx's lock on every request.
			workerCtx, stop := context.WithCancel(ctx)
			defer stop()
			w := &worker{r: r, ctx: workerCtx}
			for {
				i := int(next.Add(1) - 1)
				if i >= p.Requests {
					return
				}
				if !r.pace(ctx, i) {
					report.Results[i] = r.notSent(ctx, i)
					r.progress.finished(report.Results[i].Class)
					continue
				}
				w.do(ctx, i, &report.Results[i])
				r.progress.finished(report.Results[i].Class)
			}
		})
	}
	wg.Wait()
	stopProgress()
	report.Summary = Summarize(report.Results, time.Since(report.Started))
	if report.Summary.Canceled > 0 {
		return report, fmt.Errorf("traffic: run stopped with %d of %d requests canceled: %w",
			report.Summary.Canceled, p.Requests, ctx.Err())
	}
	return report, nil
}

// runner holds what every request of one run shares.
type runner struct {
	plan Plan
	// baseURL ends in /v1; auth is the Authorization header, nil without
	// an API key.
	baseURL    string
	auth       []string
	httpClient *http.Client
	prompts    *prompter
	capture    []headerName
	extraBody  map[string]json.RawMessage
	start      time.Time
	progress   progressCounter
}

func newRunner(p Plan) (*runner, error) {
	base, err := openAIBaseURL(p.BaseURL)
	if err != nil {
		return nil, err
	}
	extra := make(map[string]json.RawMessage, len(p.ExtraBody))
	for _, k := range sortedKeys(p.ExtraBody) {
		raw, err := json.Marshal(p.ExtraBody[k])
		if err != nil {
			return nil, fmt.Errorf("traffic: plan.ExtraBody[%q] cannot be encoded as JSON: %v", k, err)
		}
		extra[k] = raw
	}
	tr := newHTTPTransport(p.Concurrency)
	// One connection per request, as many short-lived clients (curl in a
	// loop) make: behind a Service each request then draws its own Pod.
	tr.DisableKeepAlives = p.NewConnectionPerRequest
	httpClient := &http.Client{
		Transport: tr,
		// A router does not redirect; if something does, record the 3xx
		// rather than replay a POST as GET.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var auth []string
	if p.APIKey != "" {
		auth = []string{"Bearer " + p.APIKey}
	}
	capture := append(append([]string(nil), DefaultCaptureHeaders...), p.CaptureHeaders...)
	return &runner{
		plan:       p,
		baseURL:    base,
		auth:       auth,
		httpClient: httpClient,
		prompts:    newPrompter(p.Prompts),
		capture:    headerNames(capture),
		extraBody:  extra,
	}, nil
}

// newHTTPTransport returns net/http's Transport for one run, sized so that
// every worker keeps its connection alive between requests, and closed when
// the run ends.
func newHTTPTransport(concurrency int) *http.Transport {
	// With Go's default of 2 idle connections per host, 64 workers redial
	// constantly: in bench/driver-vs-peer.sh that halved throughput and left
	// ~10k sockets in TIME_WAIT.
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          concurrency + 16,
		MaxIdleConnsPerHost:   concurrency + 16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// No Accept-Encoding: gzip. Engines answer uncompressed, and a
		// compressing proxy would hold SSE events back.
		DisableCompression: true,
	}
}

// pace waits for request i's slot under the RPS cap. It reports false when
// ctx ended first.
func (r *runner) pace(ctx context.Context, i int) bool {
	if ctx.Err() != nil {
		return false
	}
	if r.plan.RPS <= 0 || i == 0 {
		return true
	}
	at := r.start.Add(time.Duration(float64(i) / r.plan.RPS * float64(time.Second)))
	wait := time.Until(at)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// notSent is the result of a request the run never sent.
func (r *runner) notSent(ctx context.Context, i int) Result {
	return Result{
		Index:       i,
		Group:       r.prompts.group(r.plan.FirstIndex + i),
		Stream:      r.plan.streams(i),
		Class:       ClassCanceled,
		Error:       "not sent: " + ctx.Err().Error(),
		StartOffset: time.Since(r.start),
	}
}

// expand fills the {index} (the prompt's number), {group} and {nonce}
// placeholders, in one pass and one allocation (strings.NewReplacer built a
// replacer per call: most of what a request with headers allocated).
func (r *runner) expand(v string, i, group int) string {
	if !strings.Contains(v, "{") {
		return v
	}
	var num [20]byte
	b := make([]byte, 0, len(v)+len(r.plan.Prompts.Nonce)+16)
	for len(v) > 0 {
		at := strings.IndexByte(v, '{')
		if at < 0 {
			return string(append(b, v...))
		}
		b, v = append(b, v[:at]...), v[at:]
		switch {
		case strings.HasPrefix(v, "{index}"):
			b, v = append(b, strconv.AppendInt(num[:0], int64(i), 10)...), v[len("{index}"):]
		case strings.HasPrefix(v, "{group}"):
			b, v = append(b, strconv.AppendInt(num[:0], int64(group), 10)...), v[len("{group}"):]
		case strings.HasPrefix(v, "{nonce}"):
			b, v = append(b, r.plan.Prompts.Nonce...), v[len("{nonce}"):]
		default:
			b, v = append(b, '{'), v[1:]
		}
	}
	return string(b)
}

// do sends request i and records the outcome in res. Cancellation is judged
// on runCtx; the request's own context derives from the worker's, a child
// of it.
func (w *worker) do(runCtx context.Context, i int, res *Result) {
	r := w.r
	n := r.plan.FirstIndex + i // the prompt's number
	text, group := r.prompts.prompt(n)
	*res = Result{Index: i, Group: group, Stream: r.plan.streams(i)}
	ex := exchange{stream: res.Stream}
	var headers map[string]string
	if len(r.plan.Headers) > 0 {
		headers = make(map[string]string, len(r.plan.Headers))
		for k, v := range r.plan.Headers {
			headers[k] = r.expand(v, n, group)
		}
		res.HeadersSent = headers
	}
	// The run's extra fields are shared unless this request adds its own
	// session_params.
	extra := r.extraBody
	if len(r.plan.SessionParams) > 0 {
		extra = make(map[string]json.RawMessage, len(r.extraBody)+1)
		for k, v := range r.extraBody {
			extra[k] = v
		}
		res.SessionParamsSent = make(map[string]string, len(r.plan.SessionParams))
		for k, v := range r.plan.SessionParams {
			res.SessionParamsSent[k] = r.expand(v, n, group)
		}
		raw, _ := json.Marshal(res.SessionParamsSent) // a map of strings always encodes
		extra["session_params"] = raw
	}

	// The deadline bounds the whole exchange: net/http's Transport ends the
	// dial, the wait for the header and every body read once reqCtx is done,
	// and cancelling the run ends reqCtx through the worker's context.
	// begun precedes the deadline, so a timed-out request's latency is at
	// least RequestTimeout.
	begun := time.Now()
	reqCtx, cancel := context.WithTimeout(w.ctx, r.plan.RequestTimeout)
	defer cancel()
	req, err := w.request(reqCtx, &ex, text, headers, extra)
	if err == nil {
		err = w.exchange(req, &ex)
	}
	res.Class, res.Error = classify(err, &ex, runCtx, reqCtx)
	res.StartOffset = begun.Sub(r.start)
	if !ex.sentAt.IsZero() {
		res.StartOffset = ex.sentAt.Sub(r.start)
	}
	// A request that finished is timed from the moment it went to the
	// transport to the moment its last byte arrived (arrivalClock): encoding
	// before and decoding after are the driver's, not the server's.
	// Anything else is timed until now.
	if res.Class == ClassOK {
		res.Latency = ex.end.Sub(ex.sentAt)
	} else {
		res.Latency = time.Since(begun)
	}
	ex.fill(res)
	res.Status = ex.status
	res.ResponseHeaders = capture(ex.header, r.capture)
	res.RequestID = res.ResponseHeaders["x-request-id"]
	res.InferencePod = res.ResponseHeaders["x-inference-pod"]
	res.ErrorBody = ""
	if ex.status != 0 && (ex.status < 200 || ex.status >= 300) {
		res.ErrorBody = w.errBody.String()
	}
	if res.Class != ClassOK && res.Class != ClassStreamError && res.ErrorBody != "" {
		res.ErrorType, res.ErrorMessage, res.ErrorCode = parseErrorBody(w.errBody.Bytes())
		if res.ErrorMessage != "" {
			res.Error += ": " + res.ErrorMessage
		}
	}
	if res.Class == ClassStreamError {
		res.ErrorType, res.ErrorMessage, res.ErrorCode = apiErrorFields(err)
	}
}

// fill copies what the answer carried into res. A stream's TTFT runs from
// the send to the arrival of its first event with text (its first event at
// all when none had text).
func (ex *exchange) fill(res *Result) {
	res.Chunks = ex.chunks
	res.TextChars = ex.chars
	res.FinishReason = ex.finish
	res.ResponseID = ex.id
	res.Usage = ex.usage
	res.Models = ex.models
	if res.Stream {
		switch {
		case !ex.firstText.IsZero():
			res.TTFT = ex.firstText.Sub(ex.sentAt)
		case !ex.firstEvent.IsZero():
			res.TTFT = ex.firstEvent.Sub(ex.sentAt)
		}
	}
}

// streamEnd is returned when a stream's body ended; classify decides from
// the exchange whether that was after [DONE] or a cut.
type streamEnd struct{}

func (streamEnd) Error() string { return "stream ended" }
