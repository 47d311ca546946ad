package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestInvalidPlansNameTheField(t *testing.T) {
	valid := func() Plan { return Plan{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Requests: 1} }
	cases := []struct {
		name   string
		mutate func(*Plan)
		want   string
	}{
		{"zero requests", func(p *Plan) { p.Requests = 0 }, "traffic: plan.Requests must be > 0 (got 0)"},
		{"negative requests", func(p *Plan) { p.Requests = -3 }, "plan.Requests must be > 0 (got -3)"},
		{"negative concurrency", func(p *Plan) { p.Concurrency = -1 }, "plan.Concurrency must be >= 0"},
		{"empty base URL", func(p *Plan) { p.BaseURL = "" }, "plan.BaseURL must be set"},
		{"base URL without scheme", func(p *Plan) { p.BaseURL = "127.0.0.1:8081" }, "plan.BaseURL"},
		{"base URL with ftp", func(p *Plan) { p.BaseURL = "ftp://h/v1" }, "plan.BaseURL must start with http://"},
		{"base URL without host", func(p *Plan) { p.BaseURL = "http:///v1" }, "plan.BaseURL must name a host"},
		{"base URL with query", func(p *Plan) { p.BaseURL = "http://h/v1?x=1" }, "plan.BaseURL must not have a query"},
		{"negative rps", func(p *Plan) { p.RPS = -1 }, "plan.RPS must be a finite number >= 0"},
		{"NaN rps", func(p *Plan) { p.RPS = math.NaN() }, "plan.RPS"},
		{"infinite rps", func(p *Plan) { p.RPS = math.Inf(1) }, "plan.RPS"},
		{"unknown endpoint", func(p *Plan) { p.Endpoint = "/v1/embeddings" }, `plan.Endpoint must be "/v1/chat/completions", "/v1/completions" or "/v1/models" (got "/v1/embeddings")`},
		{"unknown mode", func(p *Plan) { p.Mode = "sometimes" }, `plan.Mode must be`},
		{"empty model", func(p *Plan) { p.Model = " " }, "plan.Model must name the served model"},
		{"negative max tokens", func(p *Plan) { p.MaxTokens = -1 }, "plan.MaxTokens must be >= 0"},
		{"negative timeout", func(p *Plan) { p.RequestTimeout = -time.Second }, "plan.RequestTimeout must be > 0"},
		{"negative prefix length", func(p *Plan) { p.Prompts.PrefixChars = -1 }, "plan.Prompts.PrefixChars must be >= 0 (0 means 500; got -1)"},
		{"unknown prompt kind", func(p *Plan) { p.Prompts.Kind = "random" }, "plan.Prompts.Kind must be"},
		{"groups without kind", func(p *Plan) { p.Prompts.Groups = 3 }, `use kind "prefix-groups"`},
		{"prefix groups without groups", func(p *Plan) { p.Prompts.Kind = PromptsPrefixGroups }, "plan.Prompts.Groups must be >= 1"},
		{"unrelated with groups", func(p *Plan) { p.Prompts = PromptSet{Kind: PromptsUnrelated, Groups: 2} }, "plan.Prompts.Groups must be 0"},
		{"multi-line nonce", func(p *Plan) { p.Prompts.Nonce = "a\nb" }, "plan.Prompts.Nonce must be one line"},
		{"bad header name", func(p *Plan) { p.Headers = map[string]string{"X Session": "1"} }, `plan.Headers key "X Session" is not a valid header name`},
		{"header with newline", func(p *Plan) { p.Headers = map[string]string{"X-A": "1\r\nX-B: 2"} }, `plan.Headers["X-A"] value must not contain CR, LF`},
		{"owned header", func(p *Plan) { p.Headers = map[string]string{"Content-Length": "1"} }, `plan.Headers["Content-Length"] is set by the HTTP client`},
		{"empty session params", func(p *Plan) { p.SessionParams = map[string]string{} }, "plan.SessionParams is empty"},
		{"extra body overriding stream", func(p *Plan) { p.ExtraBody = map[string]any{"stream": true} }, `plan.ExtraBody["stream"] is set by the driver; use plan.Mode`},
		{"extra body overriding session_params", func(p *Plan) { p.ExtraBody = map[string]any{"session_params": 1} }, "use plan.SessionParams"},
		{"bad capture header", func(p *Plan) { p.CaptureHeaders = []string{"ok", "bad header"} }, `plan.CaptureHeaders[1] "bad header"`},
		{"streamed model list", func(p *Plan) { p.Endpoint, p.Mode = EndpointModels, ModeStream }, `plan.Mode must be "non-stream" for /v1/models`},
		{"model list with max tokens", func(p *Plan) { p.Endpoint, p.MaxTokens = EndpointModels, 5 }, "plan.MaxTokens must be 0 for /v1/models"},
		{"model list with usage", func(p *Plan) { p.Endpoint, p.IncludeUsage = EndpointModels, true }, "plan.IncludeUsage must be false for /v1/models"},
		{"model list with session params", func(p *Plan) {
			p.Endpoint, p.SessionParams = EndpointModels, map[string]string{"session_id": "s"}
		}, "plan.SessionParams must be nil for /v1/models"},
		{"model list with extra body", func(p *Plan) { p.Endpoint, p.ExtraBody = EndpointModels, map[string]any{"x": 1} }, "plan.ExtraBody must be nil for /v1/models"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.mutate(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			rep, runErr := Run(context.Background(), p)
			if rep != nil || runErr == nil || runErr.Error() != err.Error() {
				t.Fatalf("Run() = %v, %v; want no report and the same error", rep, runErr)
			}
		})
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("the valid plan is refused: %v", err)
	}
	list := Plan{BaseURL: "http://127.0.0.1:1/v1", Endpoint: EndpointModels, Requests: 1}
	if err := list.Validate(); err != nil {
		t.Fatalf("a model list without a model is refused: %v", err)
	}
}

func TestExtraBodyThatCannotBeEncodedIsRefused(t *testing.T) {
	p := Plan{BaseURL: "http://127.0.0.1:1", Model: "m", Requests: 1, ExtraBody: map[string]any{"f": func() {}}}
	_, err := Run(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), `plan.ExtraBody["f"] cannot be encoded`) {
		t.Fatalf("err = %v", err)
	}
}

func TestDefaultsAreRecordedInTheReport(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	rep, err := Run(t.Context(), Plan{BaseURL: srv.URL, Model: "m", Requests: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Plan
	if got.Endpoint != EndpointChat || got.Mode != ModeNonStream || got.Concurrency != 1 ||
		got.RequestTimeout != DefaultRequestTimeout || got.Prompts.Kind != PromptsSharedPrefix ||
		got.Prompts.PrefixChars != DefaultPrefixChars || got.Prompts.Groups != 1 || len(got.Prompts.Nonce) != 16 {
		t.Errorf("plan as run: %+v", got)
	}
	// The recorded plan regenerates the prompt the server saw.
	text, group, err := got.Prompt(0)
	if err != nil || group != 0 {
		t.Fatalf("Prompt(0) = group %d, %v", group, err)
	}
	msgs := f.seen()[0].Body["messages"].([]any)
	if sent := msgs[0].(map[string]any)["content"]; sent != text {
		t.Errorf("server saw %q, Prompt(0) gives %q", sent, text)
	}
}

func TestSharedPrefixPromptsShareExactlyThePrefix(t *testing.T) {
	p := Plan{Prompts: PromptSet{Nonce: "abc", PrefixChars: 300}}
	first, g0, _ := p.Prompt(0)
	second, g1, _ := p.Prompt(1)
	if g0 != 0 || g1 != 0 {
		t.Errorf("groups %d %d, want 0 0", g0, g1)
	}
	if common := commonPrefix(first, second); common < 300 || first == second {
		t.Errorf("prompts share %d characters, want at least the 300-character prefix and then differ", common)
	}
	if first[:300] != leadingText("abc", "prefix", 0, 300) || !strings.Contains(first, "run abc") {
		t.Errorf("prompt does not start with the prefix or name the run: %q", first)
	}
	// Another run's nonce gives a prefix that differs from its first characters.
	other, _, _ := Plan{Prompts: PromptSet{Nonce: "abd", PrefixChars: 300}}.Prompt(0)
	if c := commonPrefix(first, other); c >= seedLen {
		t.Errorf("runs with different nonces share %d leading characters", c)
	}
	// The default length is about 500 characters.
	def, _, _ := Plan{Prompts: PromptSet{Nonce: "abc"}}.Prompt(0)
	if c := commonPrefix(def, mustPrompt(t, Plan{Prompts: PromptSet{Nonce: "abc"}}, 1)); c < DefaultPrefixChars || c > DefaultPrefixChars+20 {
		t.Errorf("default prompts share %d characters, want about %d", c, DefaultPrefixChars)
	}
}

func TestPrefixGroupsInterleaveKDistinctPrefixes(t *testing.T) {
	p := Plan{Prompts: PromptSet{Kind: PromptsPrefixGroups, Groups: 3, Nonce: "n", PrefixChars: 200}}
	prefixes := map[int]string{}
	for i := range 9 {
		text, g, err := p.Prompt(i)
		if err != nil || g != i%3 {
			t.Fatalf("Prompt(%d) = group %d, %v; want group %d", i, g, err, i%3)
		}
		if prev, ok := prefixes[g]; ok && commonPrefix(prev, text) < 200 {
			t.Errorf("request %d does not share group %d's prefix", i, g)
		}
		prefixes[g] = text
	}
	for a := range 3 {
		for b := a + 1; b < 3; b++ {
			if c := commonPrefix(prefixes[a], prefixes[b]); c >= seedLen {
				t.Errorf("groups %d and %d share %d leading characters", a, b, c)
			}
		}
	}
}

func TestUnrelatedPromptsShareNoPrefix(t *testing.T) {
	p := Plan{Prompts: PromptSet{Kind: PromptsUnrelated, Nonce: "n"}}
	var texts []string
	for i := range 20 {
		text, g, err := p.Prompt(i)
		if err != nil || g != i {
			t.Fatalf("Prompt(%d) = group %d, %v", i, g, err)
		}
		texts = append(texts, text)
	}
	for a := range texts {
		for b := a + 1; b < len(texts); b++ {
			if c := commonPrefix(texts[a], texts[b]); c >= seedLen {
				t.Errorf("unrelated prompts %d and %d share %d leading characters", a, b, c)
			}
		}
	}
}

func TestPromptOfAnInvalidPromptSetIsAnError(t *testing.T) {
	if _, _, err := (Plan{Prompts: PromptSet{Kind: PromptsPrefixGroups}}).Prompt(0); err == nil {
		t.Error("prefix-groups without groups gave no error")
	}
	if _, _, err := (Plan{Prompts: PromptSet{PrefixChars: -1}}).Prompt(0); err == nil {
		t.Error("negative prefix gave no error")
	}
}

func TestPrefixLengthIsExact(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 123, 1000} {
		if got := len(leadingText("x", "prefix", 0, n)); got != n {
			t.Errorf("leadingText(%d) has %d characters", n, got)
		}
	}
}

func TestStatsAreNearestRankPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := NewStats(ds)
	want := Stats{Count: 100, Min: time.Millisecond, Mean: 50500 * time.Microsecond,
		P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	if one := NewStats([]time.Duration{7}); one.P50 != 7 || one.P99 != 7 {
		t.Errorf("single value stats %+v", one)
	}
	if (NewStats(nil) != Stats{}) {
		t.Error("stats of nothing are not zero")
	}
}

func TestSummarizeCountsOutcomes(t *testing.T) {
	results := []Result{
		{Index: 0, Class: ClassOK, Status: 200, Stream: true, Latency: 10, TTFT: 4, InferencePod: "a"},
		{Index: 1, Group: 1, Class: ClassOK, Status: 200, Latency: 30, InferencePod: "b"},
		{Index: 2, Class: ClassHTTP5xx, Status: 503, Latency: 5},
		{Index: 3, Group: 1, Class: ClassCanceled, Latency: 8}, // canceled in flight: sent
		{Index: 4, Class: ClassCanceled},                       // never sent
	}
	s := Summarize(results, 2*time.Second)
	if s.Requests != 5 || s.OK != 2 || s.Failed != 1 || s.Canceled != 2 {
		t.Errorf("counts %+v", s)
	}
	if s.ByClass[ClassOK] != 2 || s.ByStatus[503] != 1 || s.ByStatus[0] != 2 || s.ByGroup[1] != 2 || s.ByInferencePod["a"] != 1 {
		t.Errorf("maps %+v %+v %+v %+v", s.ByClass, s.ByStatus, s.ByGroup, s.ByInferencePod)
	}
	if s.Latency.Count != 2 || s.Latency.Max != 30 || s.TTFT.Count != 1 || s.TTFT.P50 != 4 {
		t.Errorf("stats %+v %+v", s.Latency, s.TTFT)
	}
	if s.RequestsPerSecond != 2 || s.OKPerSecond != 1 {
		t.Errorf("rates %v %v, want 2 (4 sent / 2s) and 1", s.RequestsPerSecond, s.OKPerSecond)
	}
}

func TestPlanJSONUsesStableNames(t *testing.T) {
	raw, err := json.Marshal(Plan{BaseURL: "http://h/v1", Model: "m", Requests: 2, RequestTimeout: time.Second,
		SessionParams: map[string]string{"session_id": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"base_url":"http://h/v1"`, `"requests":2`, `"request_timeout_ns":1000000000`, `"session_params":{"session_id":"s"}`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("%s lacks %s", raw, key)
		}
	}
}

func TestConnectionsAreReusedAcrossRequests(t *testing.T) {
	var mu sync.Mutex
	remotes := map[string]bool{}
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		mu.Lock()
		remotes[r.RemoteAddr] = true
		mu.Unlock()
		// Chunked answers whose last bytes come late: a client that stops
		// reading at the end of the JSON or at [DONE] would lose the
		// connection on Close.
		if isStream(req) {
			answerOK(w, req)
		} else {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
			w.(http.Flusher).Flush()
		}
		time.Sleep(10 * time.Millisecond)
		_, _ = w.Write([]byte("\n"))
	})
	p := plan(srv.URL, 8)
	p.Mode = ModeAlternate
	mustRun(t, p)
	if len(remotes) != 1 {
		t.Errorf("a serial run used %d connections, want 1 kept alive", len(remotes))
	}
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func mustPrompt(t *testing.T, p Plan, i int) string {
	t.Helper()
	text, _, err := p.Prompt(i)
	if err != nil {
		t.Fatal(err)
	}
	return text
}
