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
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
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
			ex := &exchange{}
			workerCtx = withExchange(workerCtx, ex)
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
				r.do(ctx, workerCtx, ex, i, &report.Results[i])
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
	plan       Plan
	client     *openai.Client
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
	cfg := openai.DefaultConfig(p.APIKey)
	cfg.BaseURL = base
	cfg.HTTPClient = &doer{client: httpClient}
	capture := append(append([]string(nil), DefaultCaptureHeaders...), p.CaptureHeaders...)
	return &runner{
		plan:       p,
		client:     openai.NewClientWithConfig(cfg),
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
// placeholders.
func (r *runner) expand(v string, i, group int) string {
	if !strings.Contains(v, "{") {
		return v
	}
	return strings.NewReplacer("{index}", strconv.Itoa(i), "{group}", strconv.Itoa(group), "{nonce}", r.plan.Prompts.Nonce).Replace(v)
}

// do sends request i through the worker's exchange ex and records the
// outcome in res. Cancellation is judged on runCtx; the request's own context
// derives from workerCtx, a child of it that carries ex.
func (r *runner) do(runCtx, workerCtx context.Context, ex *exchange, i int, res *Result) {
	n := r.plan.FirstIndex + i // the prompt's number
	text, group := r.prompts.prompt(n)
	*res = Result{Index: i, Group: group, Stream: r.plan.streams(i)}
	*ex = exchange{stream: res.Stream}
	if len(r.plan.Headers) > 0 {
		ex.headers = make(map[string]string, len(r.plan.Headers))
		for k, v := range r.plan.Headers {
			ex.headers[k] = r.expand(v, n, group)
		}
		res.HeadersSent = ex.headers
	}
	// The doer only reads extraBody, so the run's map is shared unless this
	// request adds its own session_params.
	ex.extraBody = r.extraBody
	if len(r.plan.SessionParams) > 0 {
		ex.extraBody = make(map[string]json.RawMessage, len(r.extraBody)+1)
		for k, v := range r.extraBody {
			ex.extraBody[k] = v
		}
		res.SessionParamsSent = make(map[string]string, len(r.plan.SessionParams))
		for k, v := range r.plan.SessionParams {
			res.SessionParamsSent[k] = r.expand(v, n, group)
		}
		raw, _ := json.Marshal(res.SessionParamsSent) // a map of strings always encodes
		ex.extraBody["session_params"] = raw
	}

	// The deadline bounds the whole exchange: net/http's Transport ends the
	// dial, the wait for the header and every body read once reqCtx is done,
	// and cancelling the run ends reqCtx through workerCtx. start precedes
	// the deadline, so a timed-out request's latency is at least
	// RequestTimeout.
	start := time.Now()
	reqCtx, cancel := context.WithTimeout(workerCtx, r.plan.RequestTimeout)
	defer cancel()
	res.StartOffset = start.Sub(r.start)
	o := &ex.outcome
	o.start = start
	var err error
	switch {
	case r.plan.Endpoint == EndpointCompletions && res.Stream:
		err = r.completionStream(reqCtx, text, o)
	case r.plan.Endpoint == EndpointCompletions:
		err = r.completion(reqCtx, text, o)
	case res.Stream:
		err = r.chatStream(reqCtx, text, o)
	default:
		err = r.chat(reqCtx, text, o)
	}
	res.Latency = time.Since(start)
	o.fill(res)
	res.Status = ex.status
	res.ResponseHeaders = capture(ex.header, r.capture)
	res.RequestID = res.ResponseHeaders["x-request-id"]
	res.InferencePod = res.ResponseHeaders["x-inference-pod"]
	res.ErrorBody = ex.errBody.String()
	res.Class, res.Error = classify(err, ex, o, runCtx, reqCtx)
	if res.Class != ClassOK && res.Class != ClassStreamError && res.ErrorBody != "" {
		res.ErrorType, res.ErrorMessage, res.ErrorCode = parseErrorBody(ex.errBody.Bytes())
	}
	if res.Class == ClassStreamError {
		res.ErrorType, res.ErrorMessage, res.ErrorCode = apiErrorFields(err)
	}
}

// outcome accumulates what the answer carried.
type outcome struct {
	start     time.Time
	ttft      time.Duration
	firstSeen time.Duration
	chunks    int
	chars     int
	finish    string
	id        string
	usage     *Usage
}

// chunkSeen records that a stream event arrived.
func (o *outcome) chunkSeen() {
	if o.chunks == 0 {
		o.firstSeen = time.Since(o.start)
	}
	o.chunks++
}

// text records generated text; the first non-empty piece sets TTFT.
func (o *outcome) text(s string) {
	if s == "" {
		return
	}
	if o.ttft == 0 {
		o.ttft = time.Since(o.start)
	}
	o.chars += utf8.RuneCountInString(s)
}

func (o *outcome) setFinish(f string) {
	if f != "" && f != string(openai.FinishReasonNull) {
		o.finish = f
	}
}

func (o *outcome) setUsage(u *openai.Usage) {
	if u == nil || (u.PromptTokens == 0 && u.CompletionTokens == 0) {
		return
	}
	o.usage = &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		o.usage.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
}

func (o *outcome) fill(res *Result) {
	res.Chunks = o.chunks
	res.TextChars = o.chars
	res.FinishReason = o.finish
	res.ResponseID = o.id
	res.Usage = o.usage
	if res.Stream {
		res.TTFT = o.ttft
		if res.TTFT == 0 {
			res.TTFT = o.firstSeen
		}
	}
}

func (r *runner) streamOptions() *openai.StreamOptions {
	if !r.plan.IncludeUsage {
		return nil
	}
	return &openai.StreamOptions{IncludeUsage: true}
}

func (r *runner) chatRequest(text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:     r.plan.Model,
		Messages:  []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
		MaxTokens: r.plan.MaxTokens,
	}
}

func (r *runner) completionRequest(text string) openai.CompletionRequest {
	return openai.CompletionRequest{Model: r.plan.Model, Prompt: text, MaxTokens: r.plan.MaxTokens}
}

func (r *runner) chat(ctx context.Context, text string, o *outcome) error {
	resp, err := r.client.CreateChatCompletion(ctx, r.chatRequest(text))
	if err != nil {
		return err
	}
	o.id = resp.ID
	for _, c := range resp.Choices {
		o.chars += utf8.RuneCountInString(c.Message.Content) + utf8.RuneCountInString(c.Message.ReasoningContent)
		o.setFinish(string(c.FinishReason))
	}
	o.setUsage(&resp.Usage)
	return nil
}

func (r *runner) completion(ctx context.Context, text string, o *outcome) error {
	resp, err := r.client.CreateCompletion(ctx, r.completionRequest(text))
	if err != nil {
		return err
	}
	o.id = resp.ID
	for _, c := range resp.Choices {
		o.chars += utf8.RuneCountInString(c.Text)
		o.setFinish(c.FinishReason)
	}
	o.setUsage(resp.Usage)
	return nil
}

// streamEnd is returned by a stream loop that ended at EOF; classify decides
// from the exchange whether that was [DONE] or a cut.
type streamEnd struct{}

func (streamEnd) Error() string { return "stream ended" }

func (r *runner) chatStream(ctx context.Context, text string, o *outcome) error {
	req := r.chatRequest(text)
	req.StreamOptions = r.streamOptions()
	stream, err := r.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return err
	}
	defer stream.Close()
	for {
		chunk, err := stream.Recv()
		if err != nil {
			return endOfStream(err)
		}
		o.chunkSeen()
		for _, c := range chunk.Choices {
			o.text(c.Delta.Content)
			o.text(c.Delta.ReasoningContent)
			o.setFinish(string(c.FinishReason))
		}
		if o.id == "" {
			o.id = chunk.ID
		}
		o.setUsage(chunk.Usage)
	}
}

func (r *runner) completionStream(ctx context.Context, text string, o *outcome) error {
	req := r.completionRequest(text)
	req.StreamOptions = r.streamOptions()
	stream, err := r.client.CreateCompletionStream(ctx, req)
	if err != nil {
		return err
	}
	defer stream.Close()
	for {
		chunk, err := stream.Recv()
		if err != nil {
			return endOfStream(err)
		}
		o.chunkSeen()
		for _, c := range chunk.Choices {
			o.text(c.Text)
			o.setFinish(c.FinishReason)
		}
		if o.id == "" {
			o.id = chunk.ID
		}
		o.setUsage(chunk.Usage)
	}
}
