package traffic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails a green run that left a goroutine behind (a connection's
// reader or writer, a worker, a timer).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func plan(url string, requests int) Plan {
	return Plan{
		BaseURL:  url + "/v1",
		Model:    "test-model",
		Requests: requests,
		Prompts:  PromptSet{Nonce: "testnonce"},
	}
}

func mustRun(t *testing.T, p Plan) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rep, err := Run(ctx, p)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Results) != p.Requests {
		t.Fatalf("got %d results, want %d", len(rep.Results), p.Requests)
	}
	for i, r := range rep.Results {
		if r.Index != i {
			t.Fatalf("Results[%d].Index = %d", i, r.Index)
		}
	}
	return rep
}

func wantClass(t *testing.T, r Result, want Class) {
	t.Helper()
	if r.Class != want {
		t.Fatalf("request %d: class %q (error %q), want %q", r.Index, r.Class, r.Error, want)
	}
}

func TestChatStreamWithDoneIsOK(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 3)
	p.Mode = ModeStream
	p.IncludeUsage = true
	p.MaxTokens = 7
	rep := mustRun(t, p)
	for _, r := range rep.Results {
		wantClass(t, r, ClassOK)
		if !r.Stream || r.Status != 200 {
			t.Errorf("request %d: stream %v status %d, want a 200 stream", r.Index, r.Stream, r.Status)
		}
		// role, hello, " world", usage
		if r.Chunks != 4 || r.TextChars != len("hello world") || r.FinishReason != "stop" {
			t.Errorf("request %d: chunks %d text %d finish %q, want 4, 11, stop", r.Index, r.Chunks, r.TextChars, r.FinishReason)
		}
		if r.TTFT <= 0 || r.TTFT > r.Latency {
			t.Errorf("request %d: TTFT %v not in (0, latency %v]", r.Index, r.TTFT, r.Latency)
		}
		if r.Usage == nil || *r.Usage != (Usage{PromptTokens: 12, CompletionTokens: 2, CachedTokens: 8}) {
			t.Errorf("request %d: usage %+v", r.Index, r.Usage)
		}
		if r.RequestID != "rid-"+itoa(r.Index) || r.ResponseHeaders["x-request-id"] != r.RequestID {
			t.Errorf("request %d: x-request-id %q, headers %v", r.Index, r.RequestID, r.ResponseHeaders)
		}
		if r.ResponseID != "chatcmpl-1" {
			t.Errorf("request %d: response id %q", r.Index, r.ResponseID)
		}
	}
	for _, req := range f.seen() {
		if req.Body["max_tokens"] != float64(7) || req.Body["model"] != "test-model" {
			t.Errorf("body %v lacks max_tokens 7 / model", req.Body)
		}
	}
	if s := rep.Summary; s.OK != 3 || s.TTFT.Count != 3 || s.Latency.Count != 3 || s.ByClass[ClassOK] != 3 {
		t.Errorf("summary %+v", s)
	}
}

func TestCompletionsEndpointStreamsAndNot(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 4)
	p.Endpoint = EndpointCompletions
	p.Mode = ModeAlternate
	rep := mustRun(t, p)
	for _, r := range rep.Results {
		wantClass(t, r, ClassOK)
		if r.TextChars != len("hello world") {
			t.Errorf("request %d: text chars %d", r.Index, r.TextChars)
		}
	}
	for _, req := range f.seen() {
		if req.Path != "/v1/completions" || !strings.Contains(req.Body["prompt"].(string), "Question ") {
			t.Errorf("request went to %s with body %v", req.Path, req.Body)
		}
		if _, has := req.Body["messages"]; has {
			t.Errorf("completions body has messages: %v", req.Body)
		}
	}
	if rep.Results[0].FinishReason != "stop" || rep.Results[1].FinishReason != "length" {
		t.Errorf("finish reasons %q %q, want stop (stream) and length (non-stream)", rep.Results[0].FinishReason, rep.Results[1].FinishReason)
	}
}

func TestAlternateModeStreamsEvenRequestsAndSendsStreamOptionsOnlyThere(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 6)
	p.Mode = ModeAlternate
	p.IncludeUsage = true
	rep := mustRun(t, p)
	seen := f.seen()
	if len(seen) != 6 {
		t.Fatalf("server saw %d requests", len(seen))
	}
	for _, req := range seen {
		wantStream := req.Index%2 == 0
		if isStream(req) != wantStream {
			t.Errorf("request %d: stream %v, want %v", req.Index, isStream(req), wantStream)
		}
		opts, has := req.Body["stream_options"]
		if wantStream && !reflect.DeepEqual(opts, map[string]any{"include_usage": true}) {
			t.Errorf("stream request %d: stream_options %v", req.Index, opts)
		}
		if !wantStream && has {
			t.Errorf("non-stream request %d carries stream_options %v (vLLM answers 400)", req.Index, opts)
		}
	}
	for _, r := range rep.Results {
		wantClass(t, r, ClassOK)
		if r.Stream != (r.Index%2 == 0) {
			t.Errorf("result %d: stream %v", r.Index, r.Stream)
		}
		if !r.Stream && (r.TTFT != 0 || r.Chunks != 0) {
			t.Errorf("non-stream result %d has TTFT %v chunks %d", r.Index, r.TTFT, r.Chunks)
		}
	}
	if rep.Summary.TTFT.Count != 3 || rep.Summary.Latency.Count != 6 {
		t.Errorf("summary TTFT count %d latency count %d, want 3 and 6", rep.Summary.TTFT.Count, rep.Summary.Latency.Count)
	}
}

func TestStreamEndingWithoutDoneIsCut(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		startSSE(w)
		sse(w, roleChunk())
		sse(w, chunk(req, "hel", ""))
		// the handler returns: the chunked body ends cleanly, no [DONE]
	})
	p := plan(srv.URL, 1)
	p.Mode = ModeStream
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassStreamCut)
	if r.Chunks != 2 || r.Status != 200 || !strings.Contains(r.Error, "[DONE]") {
		t.Errorf("chunks %d status %d error %q", r.Chunks, r.Status, r.Error)
	}
}

func TestStreamWhoseConnectionDiesMidwayIsCut(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		startSSE(w)
		sse(w, roleChunk())
		sse(w, chunk(req, "hel", ""))
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = buf.Flush()
		_ = conn.Close() // mid chunked body: the client sees an unexpected EOF
	})
	p := plan(srv.URL, 1)
	p.Mode = ModeStream
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassStreamCut)
	if r.Chunks != 2 || r.TextChars != 3 {
		t.Errorf("chunks %d text %d, want 2 and 3", r.Chunks, r.TextChars)
	}
}

func TestStreamWithDoneButNoFinishReasonIsCut(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		startSSE(w)
		sse(w, chunk(req, "hello", ""))
		sse(w, "[DONE]")
	})
	p := plan(srv.URL, 1)
	p.Mode = ModeStream
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassStreamCut)
	if !strings.Contains(r.Error, "finish_reason") {
		t.Errorf("error %q does not name finish_reason", r.Error)
	}
}

func TestHTTP503WithNestedVLLMErrorBody(t *testing.T) {
	const body = `{"error":{"message":"The engine is dead","type":"ServiceUnavailableError","param":null,"code":503}}`
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "rid-err")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(body))
	})
	p := plan(srv.URL, 2)
	p.Mode = ModeAlternate
	rep := mustRun(t, p)
	for _, r := range rep.Results {
		wantClass(t, r, ClassHTTP5xx)
		if r.Status != 503 || r.ErrorBody != body {
			t.Errorf("request %d: status %d body %q", r.Index, r.Status, r.ErrorBody)
		}
		if r.ErrorType != "ServiceUnavailableError" || r.ErrorMessage != "The engine is dead" || r.ErrorCode != "503" {
			t.Errorf("request %d: parsed %q %q %q", r.Index, r.ErrorType, r.ErrorMessage, r.ErrorCode)
		}
		if r.RequestID != "rid-err" {
			t.Errorf("request %d: x-request-id %q not captured on an error answer", r.Index, r.RequestID)
		}
	}
	if s := rep.Summary; s.Failed != 2 || s.ByClass[ClassHTTP5xx] != 2 || s.ByStatus[503] != 2 || s.Latency.Count != 0 {
		t.Errorf("summary %+v", s)
	}
}

func TestHTTP503WithFlatSGLangErrorBody(t *testing.T) {
	const body = `{"object":"error","message":"Internal server error: boom","type":"InternalServerError","param":null,"code":503}`
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-SMG-Error-Code", "no_available_workers")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(body))
	})
	p := plan(srv.URL, 2)
	p.Mode = ModeAlternate
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassHTTP5xx)
		if r.ErrorBody != body || r.ErrorMessage != "Internal server error: boom" || r.ErrorType != "InternalServerError" {
			t.Errorf("request %d: body %q parsed %q %q", r.Index, r.ErrorBody, r.ErrorType, r.ErrorMessage)
		}
		if r.ResponseHeaders["x-smg-error-code"] != "no_available_workers" {
			t.Errorf("request %d: headers %v", r.Index, r.ResponseHeaders)
		}
	}
}

func TestHTTP404IsClass4xxWithStringCode(t *testing.T) {
	const body = `{"error":{"message":"The model 'x' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(body))
	})
	r := mustRun(t, plan(srv.URL, 1)).Results[0]
	wantClass(t, r, ClassHTTP4xx)
	if r.Status != 404 || r.ErrorCode != "model_not_found" {
		t.Errorf("status %d code %q", r.Status, r.ErrorCode)
	}
}

func TestMidStreamErrorEventIsStreamError(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		startSSE(w)
		sse(w, chunk(req, "hel", ""))
		// vLLM: an error after the 200 is an error event, then [DONE]
		sse(w, `{"error": {"message": "engine crashed", "type": "InternalServerError", "param": null, "code": 500}}`)
		sse(w, "[DONE]")
	})
	p := plan(srv.URL, 1)
	p.Mode = ModeStream
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassStreamError)
	if r.Status != 200 || r.ErrorMessage != "engine crashed" || r.ErrorType != "InternalServerError" || r.ErrorCode != "500" {
		t.Errorf("status %d parsed %q %q %q", r.Status, r.ErrorType, r.ErrorMessage, r.ErrorCode)
	}
}

func TestMalformedSSELineIsMalformedSSE(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		startSSE(w)
		sse(w, chunk(req, "hel", ""))
		sse(w, `{"id":"chatcmpl-1","choices":[{"delta":{"content":"lo"`) // cut JSON
		sse(w, chunk(req, "", "stop"))
		sse(w, "[DONE]")
	})
	p := plan(srv.URL, 1)
	p.Mode = ModeStream
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassMalformedSSE)
	if r.Chunks != 1 {
		t.Errorf("chunks %d, want 1 before the bad line", r.Chunks)
	}
}

func TestStreamAnsweredWithPlainJSONIsMalformedSSE(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		req.Body["stream"] = false // a server that ignores "stream": true
		answerOK(w, req)
	})
	p := plan(srv.URL, 1)
	p.Mode = ModeStream
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassMalformedSSE)
	if !strings.Contains(r.Error, "application/json") {
		t.Errorf("error %q does not name the content type", r.Error)
	}
}

func TestCancelDuringRPSWaitDoesNotWaitOutTheSchedule(t *testing.T) {
	var f fakeOpenAI
	first := make(chan struct{}, 1)
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		answerOK(w, req)
		select {
		case first <- struct{}{}:
		default:
		}
	})
	p := plan(srv.URL, 100)
	p.RPS = 1 // 99 s of schedule after the first request
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-first
		cancel()
	}()
	rep, err := Run(ctx, p)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	// Request 0 may finish or be cut by the cancel; none of the rest is sent.
	if rep.Summary.Wall > 30*time.Second {
		t.Errorf("wall %v: the run waited out the schedule", rep.Summary.Wall)
	}
	for _, r := range rep.Results[1:] {
		if r.Class != ClassCanceled || r.Latency != 0 || !strings.HasPrefix(r.Error, "not sent") {
			t.Fatalf("request %d: class %q latency %v error %q, want canceled and not sent", r.Index, r.Class, r.Latency, r.Error)
		}
	}
}

func TestNonStreamBodyThatIsNotJSONIsMalformedBody(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","choices":[`))
	})
	wantClass(t, mustRun(t, plan(srv.URL, 1)).Results[0], ClassMalformedBody)
}

func TestSlowFirstTokenShowsInTTFT(t *testing.T) {
	const delay = 120 * time.Millisecond
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		startSSE(w) // headers go out at once; the first token is late
		time.Sleep(delay)
		sse(w, roleChunk())
		sse(w, chunk(req, "hello", "stop"))
		sse(w, "[DONE]")
	})
	p := plan(srv.URL, 2)
	p.Mode = ModeStream
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassOK)
		if r.TTFT < delay || r.TTFT > r.Latency {
			t.Errorf("request %d: TTFT %v, want delay %v <= TTFT <= latency %v", r.Index, r.TTFT, delay, r.Latency)
		}
	}
}

func TestRPSCapSpacesRequestStarts(t *testing.T) {
	const rps, n = 40.0, 8
	var f fakeOpenAI
	var mu arrivals
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		mu.add(time.Now())
		answerOK(w, req)
	})
	p := plan(srv.URL, n)
	p.Concurrency = n // the cap, not the workers, must limit the rate
	p.RPS = rps
	rep := mustRun(t, p)
	arrivals := mu.sorted()
	if len(arrivals) != n {
		t.Fatalf("server saw %d requests", len(arrivals))
	}
	// Count-based: by time t after the start no more than 1 + t*rps requests
	// may have arrived, i.e. the k-th arrival is at least k/rps after start.
	for k, at := range arrivals {
		earliest := rep.Started.Add(time.Duration(float64(k) / rps * float64(time.Second)))
		if at.Before(earliest) {
			t.Errorf("arrival %d at +%v, before its slot +%v", k, at.Sub(rep.Started), earliest.Sub(rep.Started))
		}
	}
	if min := time.Duration(float64(n-1) / rps * float64(time.Second)); rep.Summary.Wall < min {
		t.Errorf("wall %v shorter than the cap allows (%v)", rep.Summary.Wall, min)
	}
}

func TestConcurrencyReachesC(t *testing.T) {
	const c, n = 6, 24
	var f fakeOpenAI
	allIn := make(chan struct{})
	var once sync.Once
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		// Hold requests until C are in flight at once (or give up after a
		// while, which the peak check below then reports).
		if f.inFlight() >= c {
			once.Do(func() { close(allIn) })
		}
		select {
		case <-allIn:
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
		answerOK(w, req)
	})
	p := plan(srv.URL, n)
	p.Concurrency = c
	rep := mustRun(t, p)
	if got := f.peakInflight(); got != c {
		t.Errorf("peak in-flight %d, want exactly %d", got, c)
	}
	if rep.Summary.OK != n {
		t.Errorf("ok %d of %d: %+v", rep.Summary.OK, n, rep.Summary.ByClass)
	}
}

func TestSerialRunSendsInIndexOrderOneAtATime(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	mustRun(t, plan(srv.URL, 5))
	for i, req := range f.seen() {
		if req.Index != i {
			t.Errorf("arrival %d was request %d", i, req.Index)
		}
	}
	if f.peakInflight() != 1 {
		t.Errorf("peak in-flight %d in a serial run", f.peakInflight())
	}
}

func TestCancelMidRunReturnsPromptlyWithCanceledResults(t *testing.T) {
	const c, n = 4, 50
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		<-r.Context().Done() // hang until the client gives up
	})
	p := plan(srv.URL, n)
	p.Concurrency = c
	p.RequestTimeout = 30 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type out struct {
		rep *Report
		err error
	}
	done := make(chan out, 1)
	go func() {
		rep, err := Run(ctx, p)
		done <- out{rep, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for f.inFlight() < c {
		if time.Now().After(deadline) {
			t.Fatalf("server never saw %d requests in flight", c)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	var o out
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancellation")
	}
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", o.err)
	}
	if o.rep == nil || len(o.rep.Results) != n {
		t.Fatalf("report %v", o.rep)
	}
	sent := 0
	for _, r := range o.rep.Results {
		wantClass(t, r, ClassCanceled)
		if r.Latency > 0 {
			sent++
		}
	}
	if sent != c || o.rep.Summary.Canceled != n {
		t.Errorf("%d canceled in flight (want %d), summary canceled %d (want %d)", sent, c, o.rep.Summary.Canceled, n)
	}
	srv.Close()
	goleak.VerifyNone(t)
}

func TestRequestTimeoutIsClassTimeout(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		if isStream(req) {
			startSSE(w) // a stream that stalls after its headers
		}
		<-r.Context().Done()
	})
	p := plan(srv.URL, 2)
	p.Mode = ModeAlternate
	p.RequestTimeout = 50 * time.Millisecond
	for _, r := range mustRun(t, p).Results { // mustRun: a timeout is not a canceled run
		wantClass(t, r, ClassTimeout)
		if !strings.Contains(r.Error, "context deadline exceeded") {
			t.Errorf("request %d: error %q, want net/http's context deadline exceeded", r.Index, r.Error)
		}
		if r.Latency < p.RequestTimeout {
			t.Errorf("request %d timed out after %v, before %v", r.Index, r.Latency, p.RequestTimeout)
		}
	}
}

// The timeout bounds the whole exchange, not the gap between reads: a stream
// that keeps sending past RequestTimeout is still cut at it.
func TestRequestTimeoutCoversAStreamThatKeepsSending(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		startSSE(w)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				sse(w, chunk(req, "tok", ""))
			}
		}
	})
	p := plan(srv.URL, 1)
	p.Mode = ModeStream
	p.RequestTimeout = 100 * time.Millisecond
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassTimeout)
	if r.Chunks < 2 || r.Latency < p.RequestTimeout {
		t.Errorf("chunks %d latency %v: want a flowing stream cut at %v", r.Chunks, r.Latency, p.RequestTimeout)
	}
}

func TestConnectionRefusedIsClassConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := plan("http://"+addr, 2)
	p.Mode = ModeAlternate
	rep := mustRun(t, p)
	for _, r := range rep.Results {
		wantClass(t, r, ClassConnect)
		if r.Status != 0 {
			t.Errorf("status %d without a server", r.Status)
		}
	}
}

func TestServerClosingBeforeAnswerIsClassTransport(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	wantClass(t, mustRun(t, plan(srv.URL, 1)).Results[0], ClassTransport)
}

func TestHeadersAndSessionParamsReachTheServer(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 6)
	p.Mode = ModeAlternate
	p.Prompts = PromptSet{Kind: PromptsPrefixGroups, Groups: 3, Nonce: "n1"}
	p.Headers = map[string]string{"X-Session-Id": "sess-{group}", "X-SMG-Routing-Key": "key-{index}-{nonce}"}
	p.SessionParams = map[string]string{"session_id": "s-{group}"}
	p.ExtraBody = map[string]any{"temperature": 0, "ignore_eos": true}
	rep := mustRun(t, p)
	seen := f.seen()
	if len(seen) != 6 {
		t.Fatalf("server saw %d requests", len(seen))
	}
	for _, req := range seen {
		i, g := req.Index, req.Index%3
		if got := req.Header.Get("X-Session-Id"); got != "sess-"+itoa(g) {
			t.Errorf("request %d: X-Session-Id %q", i, got)
		}
		if got := req.Header.Get("X-SMG-Routing-Key"); got != "key-"+itoa(i)+"-n1" {
			t.Errorf("request %d: X-SMG-Routing-Key %q", i, got)
		}
		if got := req.Body["session_params"]; !reflect.DeepEqual(got, map[string]any{"session_id": "s-" + itoa(g)}) {
			t.Errorf("request %d: session_params %v", i, got)
		}
		if req.Body["temperature"] != float64(0) || req.Body["ignore_eos"] != true {
			t.Errorf("request %d: extra body missing: %v", i, req.Body)
		}
		// go-openai's own fields survive the merge
		if req.Body["model"] != "test-model" || req.Body["messages"] == nil || isStream(req) != (i%2 == 0) {
			t.Errorf("request %d: body lost fields: %v", i, req.Body)
		}
	}
	for _, r := range rep.Results {
		wantClass(t, r, ClassOK)
		if r.Group != r.Index%3 || r.HeadersSent["X-Session-Id"] != "sess-"+itoa(r.Group) || r.SessionParamsSent["session_id"] != "s-"+itoa(r.Group) {
			t.Errorf("result %d: group %d headers %v session %v", r.Index, r.Group, r.HeadersSent, r.SessionParamsSent)
		}
	}
	if !reflect.DeepEqual(rep.Summary.ByGroup, map[int]int{0: 2, 1: 2, 2: 2}) {
		t.Errorf("by group %v", rep.Summary.ByGroup)
	}
}

func TestExtraBodyWithoutSessionParamsReachesEveryConcurrentRequest(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 8)
	p.Concurrency = 4
	p.ExtraBody = map[string]any{"temperature": 0, "ignore_eos": true}
	rep := mustRun(t, p)
	seen := f.seen()
	if len(seen) != 8 {
		t.Fatalf("server saw %d requests", len(seen))
	}
	for _, req := range seen {
		if req.Body["temperature"] != float64(0) || req.Body["ignore_eos"] != true {
			t.Errorf("request %d: extra body missing: %v", req.Index, req.Body)
		}
		if _, ok := req.Body["session_params"]; ok || req.Body["model"] != "test-model" {
			t.Errorf("request %d: body %v", req.Index, req.Body)
		}
	}
	for _, r := range rep.Results {
		wantClass(t, r, ClassOK)
		if r.SessionParamsSent != nil {
			t.Errorf("result %d: session params %v without SessionParams", r.Index, r.SessionParamsSent)
		}
	}
}

func TestBaseURLWithoutV1AndAPIKey(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 1)
	p.BaseURL = srv.URL + "/"
	p.APIKey = "sk-test"
	wantClass(t, mustRun(t, p).Results[0], ClassOK)
	req := f.seen()[0]
	if req.Path != "/v1/chat/completions" || req.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("path %q authorization %q", req.Path, req.Header.Get("Authorization"))
	}
	if req.Header.Get("X-Request-Id") != "" {
		t.Errorf("driver sent X-Request-Id %q; routers hash on it", req.Header.Get("X-Request-Id"))
	}
}

func TestInferencePodHeaderIsCountedPerPod(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	rep := mustRun(t, plan(srv.URL, 5))
	if !reflect.DeepEqual(rep.Summary.ByInferencePod, map[string]int{"pod-0": 3, "pod-1": 2}) {
		t.Errorf("by pod %v", rep.Summary.ByInferencePod)
	}
}

func TestReportRoundTripsThroughJSON(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		if req.Index == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"message":"busy","type":"x","code":503}}`))
			return
		}
		answerOK(w, req)
	})
	p := plan(srv.URL, 4)
	p.Mode = ModeAlternate
	p.IncludeUsage = true
	p.APIKey = "secret"
	p.Headers = map[string]string{"X-Session-Id": "s"}
	rep := mustRun(t, p)
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if strings.Contains(string(raw), "secret") {
		t.Error("the API key was serialised")
	}
	var back Report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if !back.Started.Equal(rep.Started) {
		t.Errorf("started %v != %v", back.Started, rep.Started)
	}
	want := *rep
	want.Plan.APIKey = ""
	want.Started, back.Started = time.Time{}, time.Time{}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", back, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// arrivals collects arrival times from handler goroutines.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) add(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, t)
}

func (a *arrivals) sorted() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]time.Time(nil), a.at...)
	slices.SortFunc(out, func(x, y time.Time) int { return x.Compare(y) })
	return out
}

func TestFirstIndexContinuesAPlansPrompts(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 3)
	p.Prompts = PromptSet{Kind: PromptsPrefixGroups, Groups: 2, Nonce: "n1"}
	p.Headers = map[string]string{"X-Key": "k-{index}"}
	p.FirstIndex = 5
	rep := mustRun(t, p)
	seen := f.seen()
	if len(seen) != 3 {
		t.Fatalf("server saw %d requests", len(seen))
	}
	whole := p
	whole.FirstIndex, whole.Requests = 0, 8
	for k, r := range rep.Results {
		n := 5 + k
		if r.Index != k || r.Group != n%2 || r.HeadersSent["X-Key"] != "k-"+itoa(n) {
			t.Errorf("result %d: index %d group %d headers %v", k, r.Index, r.Group, r.HeadersSent)
		}
		want, _, err := whole.Prompt(n)
		got, _, _ := p.Prompt(k)
		if err != nil || got != want {
			t.Errorf("Prompt(%d) of the continued plan is not prompt %d of the whole plan", k, n)
		}
		if seen[k].Index != n {
			t.Errorf("request %d sent question %d, want %d", k, seen[k].Index, n)
		}
	}
	p.FirstIndex = -1
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "plan.FirstIndex must be >= 0") {
		t.Errorf("Validate with FirstIndex -1: %v", err)
	}
}

func TestModelsEndpointIsListModelsGET(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" || len(body) > 0 {
			http.Error(w, fmt.Sprintf("%s %s with %d bytes", r.Method, r.URL.Path, len(body)), http.StatusBadRequest)
			return
		}
		// sgl-model-gateway's answer: a JSON list sent as text/plain.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"m1","object":"model","owned_by":"local"},{"id":"m2","owned_by":"local"}]}`)
	}))
	defer srv.Close()
	p := Plan{BaseURL: srv.URL, Endpoint: EndpointModels, Requests: 3, NewConnectionPerRequest: true, APIKey: "k",
		CaptureHeaders: []string{"Content-Type"}}
	rep := mustRun(t, p)
	for _, r := range rep.Results {
		wantClass(t, r, ClassOK)
		want := []Model{{ID: "m1", OwnedBy: "local"}, {ID: "m2", OwnedBy: "local"}}
		if r.Status != http.StatusOK || !slices.Equal(r.Models, want) || r.ResponseHeaders["content-type"] != "text/plain; charset=utf-8" {
			t.Errorf("request %d: status %d models %v headers %v", r.Index, r.Status, r.Models, r.ResponseHeaders)
		}
		if r.Latency <= 0 {
			t.Errorf("request %d: latency %v", r.Index, r.Latency)
		}
	}
	for _, r := range seen {
		if r.Header.Get("Accept") != "application/json" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("headers %v, want go-openai's", r.Header)
		}
	}
	if rep.Summary.OK != 3 {
		t.Errorf("summary %+v", rep.Summary)
	}
}

func TestModelsEndpointClassifiesLikeTheOtherCalls(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Case") == "malformed" {
			fmt.Fprint(w, `{"data": [`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"message":"no such route","type":"NotFound","code":404}}`)
	}))
	defer srv.Close()
	p := Plan{BaseURL: srv.URL, Endpoint: EndpointModels, Requests: 1}
	r := mustRun(t, p).Results[0]
	wantClass(t, r, ClassHTTP4xx)
	if r.Status != http.StatusNotFound || r.ErrorMessage != "no such route" || r.Models != nil {
		t.Errorf("status %d message %q models %v", r.Status, r.ErrorMessage, r.Models)
	}
	p.Headers = map[string]string{"X-Case": "malformed"}
	wantClass(t, mustRun(t, p).Results[0], ClassMalformedBody)
}
