package traffic

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// The driver's hot path: go run over loopback against a server that answers
// at once, so the numbers are the driver's own cost per request.
//
//	go test -run '^$' -bench . -benchmem ./traffic/

const fastChat = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello world"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":120,"total_tokens":136,"completion_tokens":16}}`

func fastServer(b *testing.B) *httptest.Server {
	b.Helper()
	chunks := []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello"},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":"stop"}]}`,
		`[DONE]`,
	}
	var stream bytes.Buffer
	for _, c := range chunks {
		stream.WriteString("data: " + c + "\n\n")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(stream.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(fastChat))
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchRun(b *testing.B, mode Mode, concurrency int) {
	srv := fastServer(b)
	p := Plan{BaseURL: srv.URL, Model: "m", Requests: b.N, Concurrency: concurrency, Mode: mode, MaxTokens: 16}
	b.ReportAllocs()
	b.ResetTimer()
	rep, err := Run(context.Background(), p)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if rep.Summary.OK != b.N {
		b.Fatalf("ok %d of %d: %v", rep.Summary.OK, b.N, rep.Summary.ByClass)
	}
	b.ReportMetric(rep.Summary.RequestsPerSecond, "req/s")
}

func BenchmarkRunChatNonStreamC1(b *testing.B)  { benchRun(b, ModeNonStream, 1) }
func BenchmarkRunChatNonStreamC64(b *testing.B) { benchRun(b, ModeNonStream, 64) }
func BenchmarkRunChatStreamC1(b *testing.B)     { benchRun(b, ModeStream, 1) }
func BenchmarkRunChatStreamC64(b *testing.B)    { benchRun(b, ModeStream, 64) }

func BenchmarkPromptSharedPrefix(b *testing.B) {
	p := newPrompter(Plan{Prompts: PromptSet{Nonce: "n"}}.withDefaults().Prompts)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = p.prompt(i)
	}
}

func BenchmarkPromptUnrelated(b *testing.B) {
	p := newPrompter(Plan{Prompts: PromptSet{Kind: PromptsUnrelated, Nonce: "n"}}.withDefaults().Prompts)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = p.prompt(i)
	}
}

// BenchmarkSSEEvents measures the event reader every streamed byte passes.
func BenchmarkSSEEvents(b *testing.B) {
	event := "data: " + strings.Repeat(`{"choices":[{"delta":{"content":"tok"}}]}`, 2) + "\n\n"
	payload := []byte(strings.Repeat(event, 200) + "data: [DONE]\n\n")
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var e eventReader
	for b.Loop() {
		e.reset(bytes.NewReader(payload))
		var err error
		for err == nil {
			_, err = e.next()
		}
		if err != errDone {
			b.Fatalf("[DONE] not seen: %v", err)
		}
	}
}

func BenchmarkSummarize10k(b *testing.B) {
	results := make([]Result, 10000)
	for i := range results {
		results[i] = Result{Index: i, Class: ClassOK, Stream: i%2 == 0, Latency: time.Duration(i) * time.Microsecond, TTFT: time.Duration(i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Summarize(results, time.Second)
	}
}

// BenchmarkGoOpenAIJSON isolates what go-openai's encoding/json costs per
// non-streaming chat request (request Marshal, response Decode), the part of
// the driver's CPU that a raw load generator such as hey does not spend.
func BenchmarkGoOpenAIJSON(b *testing.B) {
	text, _ := newPrompter(Plan{Prompts: PromptSet{Nonce: "n"}}.withDefaults().Prompts).prompt(1)
	req := openai.ChatCompletionRequest{
		Model:     "m",
		Messages:  []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
		MaxTokens: 16,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(req); err != nil {
			b.Fatal(err)
		}
		var resp openai.ChatCompletionResponse
		if err := json.NewDecoder(strings.NewReader(fastChat)).Decode(&resp); err != nil {
			b.Fatal(err)
		}
	}
}
