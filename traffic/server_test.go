package traffic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"
)

// fakeOpenAI is a loopback OpenAI server for the tests. It records every
// request and answers through a per-test handler; the helpers below write
// the bodies vLLM writes.
type fakeOpenAI struct {
	mu       sync.Mutex
	requests []seenRequest
	inflight int
	peak     int
}

type seenRequest struct {
	Path   string
	Header http.Header
	Body   map[string]any
	// Index is the request index parsed from the prompt's question.
	Index int
}

var questionIndex = regexp.MustCompile(`Question (\d+) of run`)

// start serves handle on a loopback httptest server closed at test end.
func (f *fakeOpenAI) start(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, req seenRequest)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := seenRequest{Path: r.URL.Path, Header: r.Header.Clone(), Index: -1}
		if err := json.NewDecoder(r.Body).Decode(&req.Body); err != nil {
			http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
			return
		}
		prompt, _ := req.Body["prompt"].(string)
		if msgs, ok := req.Body["messages"].([]any); ok && len(msgs) > 0 {
			m, _ := msgs[0].(map[string]any)
			prompt, _ = m["content"].(string)
		}
		if m := questionIndex.FindStringSubmatch(prompt); m != nil {
			req.Index, _ = strconv.Atoi(m[1])
		}
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.inflight++
		f.peak = max(f.peak, f.inflight)
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.inflight--
			f.mu.Unlock()
		}()
		handle(w, r, req)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeOpenAI) seen() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.requests...)
}

func (f *fakeOpenAI) peakInflight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}

func (f *fakeOpenAI) inFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight
}

func isStream(req seenRequest) bool {
	s, _ := req.Body["stream"].(bool)
	return s
}

func isChat(req seenRequest) bool { return req.Path == "/v1/chat/completions" }

// sse writes one event and flushes it.
func sse(w http.ResponseWriter, data string) {
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// chunk is a vLLM stream chunk for the request's endpoint carrying text and,
// when non-empty, a finish_reason.
func chunk(req seenRequest, text, finish string) string {
	fr := "null"
	if finish != "" {
		fr = strconv.Quote(finish)
	}
	if isChat(req) {
		return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":%s}]}`, text, fr)
	}
	return fmt.Sprintf(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":%q,"logprobs":null,"finish_reason":%s}]}`, text, fr)
}

func roleChunk() string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`
}

func usageChunk(req seenRequest) string {
	object := "chat.completion.chunk"
	if !isChat(req) {
		object = "text_completion"
	}
	return `{"id":"x","object":"` + object + `","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}`
}

// answerOK answers as vLLM does: a JSON completion, or an SSE stream with a
// role chunk (chat), "hello" and " world" (the latter with finish_reason
// "stop"), a usage chunk when asked, and [DONE].
func answerOK(w http.ResponseWriter, req seenRequest) {
	w.Header().Set("X-Request-Id", "rid-"+strconv.Itoa(req.Index))
	w.Header().Set("X-Inference-Pod", "pod-"+strconv.Itoa(req.Index%2))
	if isStream(req) {
		startSSE(w)
		if isChat(req) {
			sse(w, roleChunk())
		}
		sse(w, chunk(req, "hello", ""))
		sse(w, chunk(req, " world", "stop"))
		if opts, ok := req.Body["stream_options"].(map[string]any); ok && opts["include_usage"] == true {
			sse(w, usageChunk(req))
		}
		sse(w, "[DONE]")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	usage := `"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2,"prompt_tokens_details":null}`
	if isChat(req) {
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello world","refusal":null,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],%s}`, req.Index, usage)
		return
	}
	fmt.Fprintf(w, `{"id":"cmpl-%d","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"hello world","logprobs":null,"finish_reason":"length","stop_reason":null}],%s}`, req.Index, usage)
}
