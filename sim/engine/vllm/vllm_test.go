package vllm

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

// The PUB writer of zmq4 v0.17.0 outlives its socket (closePub says why).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}

const model = "Qwen/Qwen3-0.6B"

// start runs `vllm serve <model> [extra] --host 0.0.0.0 --port 8000` as the
// operator renders it, and waits for /health.
func start(t *testing.T, extra []string, env map[string]string) *enginetest.Engine {
	t.Helper()
	args := append([]string{"serve", model}, extra...)
	args = append(args, "--host", "0.0.0.0", "--port", "8000")
	e := enginetest.Start(t, Main, args, env)
	if err := e.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return e
}

func value(t *testing.T, f enginetest.Families, name string, labels ...string) float64 {
	t.Helper()
	v, ok := f.Value(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

func post(t *testing.T, e *enginetest.Engine, path, body string, headers ...string) (int, http.Header, map[string]any) {
	t.Helper()
	code, h, b, err := e.Post(path, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s answered non-JSON %q: %v", path, b, err)
		}
	}
	return code, h, out
}

func chatBody(content string, extra string) string {
	return enginetest.ChatBody(model, content, extra)
}

// idsPrompt is a completion body whose prompt is exactly these token ids.
func idsPrompt(ids []int, extra string) string {
	b, _ := json.Marshal(ids)
	return `{"model":"` + model + `","prompt":` + string(b) + extra + `}`
}

func ids(start, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = start + i
	}
	return s
}

func usageOf(t *testing.T, resp map[string]any) map[string]any {
	t.Helper()
	u, ok := resp["usage"].(map[string]any)
	if !ok {
		t.Fatalf("no usage in %v", resp)
	}
	return u
}

func TestUnknownFlagExits2(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"serve", model, "--bogus-flag", "x", "--host", "0.0.0.0", "--port", "8000"}, nil)
	code, err := e.Wait(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	want := "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\nvllm: error: unrecognized arguments: --bogus-flag x\n"
	if got := e.Stderr.String(); got != want {
		t.Fatalf("stderr =\n%q\nwant\n%q", got, want)
	}
	if e.Listening() {
		t.Fatal("listened despite the argparse error")
	}
}

func TestVLLMBadValueIsServeSubparserError(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"serve", model, "--max-num-seqs", "many"}, nil)
	if code, _ := e.Wait(5 * time.Second); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	want := "usage: vllm serve [model_tag] [options]\nvllm serve: error: argument --max-num-seqs: invalid int value: 'many'\n"
	if got := e.Stderr.String(); got != want {
		t.Fatalf("stderr =\n%q\nwant\n%q", got, want)
	}
}

func TestVLLMAcceptsUnderscoreFlagsAndModelOption(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"serve", "--model", "m1", "--max_num_seqs", "3", "--served-model-name", "alias", "--tensor-parallel-size", "2", "--enforce-eager", "--kv-transfer-config", `{"kv_connector":"MooncakeConnector"}`, "--port", "8000"}, nil)
	if err := e.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, _, resp := get(t, e, "/v1/models")
	data := resp["data"].([]any)[0].(map[string]any)
	if data["id"] != "alias" || data["root"] != "m1" {
		t.Fatalf("models %v", resp)
	}
	if !strings.Contains(e.Stdout.String(), "'max_num_seqs': 3") {
		t.Fatalf("non-default args line lacks max_num_seqs:\n%s", e.Stdout.String())
	}
}

func get(t *testing.T, e *enginetest.Engine, path string) (int, []byte, map[string]any) {
	t.Helper()
	code, body := e.Get(t, path)
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	return code, body, out
}

func TestVLLMStartupLogsAnnounceTheServer(t *testing.T) {
	e := start(t, nil, nil)
	out := e.Stdout.String()
	for _, want := range []string{
		"(APIServer pid=1) INFO ",
		"vLLM API server version 0.29.0",
		"Starting vLLM API server 0 on http://0.0.0.0:8000",
		"GPU KV cache size: 131,072 tokens",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(e.Stderr.String(), "INFO:     Application startup complete.") {
		t.Errorf("stderr lacks uvicorn's startup line:\n%s", e.Stderr.String())
	}
}

func TestVLLMHealthIsEmpty200(t *testing.T) {
	e := start(t, nil, nil)
	code, body, _ := get(t, e, "/health")
	if code != 200 || len(body) != 0 {
		t.Fatalf("/health = %d %q, want 200 with an empty body", code, body)
	}
	code, body, _ = get(t, e, "/nope")
	if code != 404 || string(body) != `{"detail":"Not Found"}` {
		t.Fatalf("unknown route = %d %s", code, body)
	}
}

func TestStartupDelayHealth(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"serve", model, "--port", "8000"}, map[string]string{"SIM_ENGINE_STARTUP_DELAY": "300ms"})
	// While the model loads nothing listens: the connection is refused.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.URL, "http://"), time.Second)
	if err == nil {
		conn.Close()
		t.Fatal("connected during the start-up delay")
	}
	if err := e.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Stderr.String(), "Application startup complete.") {
		t.Fatal("ready without the startup-complete line")
	}
}

func TestVLLMCountersHaveTotalSuffixAndPrecreatedSeries(t *testing.T) {
	e := start(t, nil, nil)
	f := e.Scrape(t)
	for _, name := range []string{"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total", "vllm:prompt_tokens_cached_total"} {
		mf := f[name]
		if mf == nil || mf.GetType().String() != "COUNTER" {
			t.Fatalf("%s missing or not a counter", name)
		}
		if v := value(t, f, name, "model_name", model, "engine", "0"); v != 0 {
			t.Fatalf("%s = %v before any request", name, v)
		}
	}
	for _, reason := range []string{"stop", "length", "abort", "error", "repetition"} {
		if v := value(t, f, "vllm:request_success_total", "finished_reason", reason, "engine", "0"); v != 0 {
			t.Fatalf("request_success_total{%s} = %v", reason, v)
		}
	}
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
		if v := value(t, f, name, "model_name", model); v != 0 {
			t.Fatalf("%s = %v", name, v)
		}
	}
	if v := value(t, f, "vllm:time_to_first_token_seconds_count"); v != 0 {
		t.Fatalf("ttft count %v", v)
	}
	if v := value(t, f, "vllm:cache_config_info", "block_size", "16", "enable_prefix_caching", "True", "engine", "0"); v != 1 {
		t.Fatalf("cache_config_info = %v", v)
	}
	// Single-process prometheus_client also emits *_created gauges.
	if f["vllm:prompt_tokens_created"] == nil {
		t.Fatal("no vllm:prompt_tokens_created family")
	}
}

func TestVLLMHistogramBucketsMatchLoggers(t *testing.T) {
	e := start(t, nil, nil)
	_, raw, _ := get(t, e, "/metrics")
	text := string(raw)
	les := func(family string) []string {
		re := regexp.MustCompile(regexp.QuoteMeta(family) + `_bucket\{[^}]*le="([^"]+)"\}`)
		var out []string
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
		return out
	}
	for family, want := range map[string]string{
		"vllm:time_to_first_token_seconds":  "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1.0 2.5 5.0 7.5 10.0 20.0 40.0 80.0 160.0 640.0 2560.0 +Inf",
		"vllm:inter_token_latency_seconds":  "0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1.0 2.5 5.0 7.5 10.0 20.0 40.0 80.0 +Inf",
		"vllm:e2e_request_latency_seconds":  "0.3 0.5 0.8 1.0 1.5 2.0 2.5 5.0 10.0 15.0 20.0 30.0 40.0 50.0 60.0 120.0 240.0 480.0 960.0 1920.0 7680.0 +Inf",
		"vllm:request_queue_time_seconds":   "0.3 0.5 0.8 1.0 1.5 2.0 2.5 5.0 10.0 15.0 20.0 30.0 40.0 50.0 60.0 120.0 240.0 480.0 960.0 1920.0 7680.0 +Inf",
		"vllm:iteration_tokens_total":       "1.0 8.0 16.0 32.0 64.0 128.0 256.0 512.0 1024.0 2048.0 4096.0 8192.0 16384.0 +Inf",
		"vllm:request_params_n":             "1.0 2.0 5.0 10.0 20.0 +Inf",
		"vllm:request_prompt_tokens":        "1.0 2.0 5.0 10.0 20.0 50.0 100.0 200.0 500.0 1000.0 2000.0 5000.0 10000.0 20000.0 +Inf",
		"vllm:request_decode_time_seconds":  "0.3 0.5 0.8 1.0 1.5 2.0 2.5 5.0 10.0 15.0 20.0 30.0 40.0 50.0 60.0 120.0 240.0 480.0 960.0 1920.0 7680.0 +Inf",
		"vllm:request_prefill_time_seconds": "0.3 0.5 0.8 1.0 1.5 2.0 2.5 5.0 10.0 15.0 20.0 30.0 40.0 50.0 60.0 120.0 240.0 480.0 960.0 1920.0 7680.0 +Inf",
	} {
		if got := strings.Join(les(family), " "); got != want {
			t.Errorf("%s buckets\n got %s\nwant %s", family, got, want)
		}
	}
	if !strings.Contains(text, `vllm:time_to_first_token_seconds_bucket{model_name="`+model+`",engine="0",le="0.001"} 0.0`) {
		t.Errorf("labels not in prometheus_client's declared order:\n%s", text[:400])
	}
}

func TestVLLMPrefixHitsAreBlockAlignedAndCappedAtNMinus1(t *testing.T) {
	e := start(t, []string{"--enable-prompt-tokens-details"}, nil)
	shared := ids(1000, 100)
	steps := []struct {
		name          string
		prompt        []int
		queries, hits float64
	}{
		{"cold 100-token prompt", shared, 100, 0},
		{"exact repeat: min(100, 99) block aligned", shared, 100, 96},
		{"50 shared tokens then a fork", append(slices.Clone(shared[:50]), ids(9000, 30)...), 80, 48},
		{"15-token prompt, no full block", shared[:15], 15, 0},
		{"17-token prompt shares one block", shared[:17], 17, 16},
	}
	for _, st := range steps {
		before := e.Scrape(t)
		code, _, resp := post(t, e, "/v1/completions", idsPrompt(st.prompt, `,"max_tokens":2`))
		if code != 200 {
			t.Fatalf("%s: status %d %v", st.name, code, resp)
		}
		after := e.Scrape(t)
		dq := value(t, after, "vllm:prefix_cache_queries_total") - value(t, before, "vllm:prefix_cache_queries_total")
		dh := value(t, after, "vllm:prefix_cache_hits_total") - value(t, before, "vllm:prefix_cache_hits_total")
		if dq != st.queries || dh != st.hits {
			t.Fatalf("%s: queries +%v hits +%v, want +%v +%v", st.name, dq, dh, st.queries, st.hits)
		}
		if dc := value(t, after, "vllm:prompt_tokens_cached_total") - value(t, before, "vllm:prompt_tokens_cached_total"); dc != st.hits {
			t.Fatalf("%s: prompt_tokens_cached +%v, want +%v", st.name, dc, st.hits)
		}
		details, _ := usageOf(t, resp)["prompt_tokens_details"].(map[string]any)
		switch {
		case st.hits == 0 && details != nil:
			t.Fatalf("%s: prompt_tokens_details %v with no hit", st.name, details)
		case st.hits > 0 && (details == nil || details["cached_tokens"] != st.hits):
			t.Fatalf("%s: prompt_tokens_details %v, want cached_tokens %v", st.name, details, st.hits)
		}
	}
}

func TestVLLMBlockSizeFlagSetsHitGranularity(t *testing.T) {
	e := start(t, []string{"--block-size", "32"}, nil)
	p := idsPrompt(ids(5, 64), `,"max_tokens":1`)
	post(t, e, "/v1/completions", p)
	before := e.Scrape(t)
	post(t, e, "/v1/completions", p)
	after := e.Scrape(t)
	if dh := value(t, after, "vllm:prefix_cache_hits_total") - value(t, before, "vllm:prefix_cache_hits_total"); dh != 32 {
		t.Fatalf("hits +%v, want 32 (floor(63/32)*32)", dh)
	}
	if v := value(t, after, "vllm:cache_config_info", "block_size", "32"); v != 1 {
		t.Fatal("cache_config_info does not report block_size 32")
	}
}

func TestVLLMNoPrefixCachingCountsNothing(t *testing.T) {
	e := start(t, []string{"--no-enable-prefix-caching"}, nil)
	p := idsPrompt(ids(5, 64), `,"max_tokens":1`)
	post(t, e, "/v1/completions", p)
	post(t, e, "/v1/completions", p)
	f := e.Scrape(t)
	if q, h := value(t, f, "vllm:prefix_cache_queries_total"), value(t, f, "vllm:prefix_cache_hits_total"); q != 0 || h != 0 {
		t.Fatalf("queries %v hits %v with caching off", q, h)
	}
	if value(t, f, "vllm:cache_config_info", "enable_prefix_caching", "False") != 1 {
		t.Fatal("cache_config_info does not say enable_prefix_caching False")
	}
	if value(t, f, "vllm:prompt_tokens_total") != 128 {
		t.Fatal("prompt tokens not counted")
	}
}

func TestVLLMChatSharedPrefixHitsThroughTemplate(t *testing.T) {
	e := start(t, nil, nil)
	prefix := strings.Repeat("The shared system context for this test run. ", 12) // ~540 bytes
	post(t, e, "/v1/chat/completions", chatBody(prefix+"first question", ""))
	before := e.Scrape(t)
	code, _, resp := post(t, e, "/v1/chat/completions", chatBody(prefix+"second, different question", ""))
	if code != 200 {
		t.Fatal(code)
	}
	after := e.Scrape(t)
	n := int(usageOf(t, resp)["prompt_tokens"].(float64))
	shared := sharedTokens(chatText(prefix+"first question"), chatText(prefix+"second, different question"))
	want := float64(16 * (min(shared, n-1) / 16))
	if dh := value(t, after, "vllm:prefix_cache_hits_total") - value(t, before, "vllm:prefix_cache_hits_total"); dh != want || want < 128 {
		t.Fatalf("hits +%v, want %v (shared %d of %d tokens)", dh, want, shared, n)
	}
}

func chatText(content string) string {
	return tokenize.ApplyChatTemplate([]tokenize.Message{{Role: "user", Content: content}})
}

func sharedTokens(a, b string) int {
	x, y := tokenize.Encode(nil, a), tokenize.Encode(nil, b)
	n := 0
	for n < len(x) && n < len(y) && x[n] == y[n] {
		n++
	}
	return n
}

func TestVLLMUnknownModel404Shape(t *testing.T) {
	e := start(t, nil, nil)
	code, _, b, err := e.Post("/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"error\":{\"message\":\"The model `gpt-4` does not exist.\",\"type\":\"NotFoundError\",\"param\":\"model\",\"code\":404}}"
	if code != 404 || string(b) != want {
		t.Fatalf("got %d %s\nwant 404 %s", code, b, want)
	}
}

func TestVLLMValidationErrorsAreNested400s(t *testing.T) {
	e := start(t, nil, nil)
	check := func(name string, code int, resp map[string]any, typ, param, msgPart string) {
		t.Helper()
		if code != 400 {
			t.Fatalf("%s: status %d", name, code)
		}
		er, _ := resp["error"].(map[string]any)
		if er == nil || er["type"] != typ || er["code"] != 400.0 || !strings.Contains(er["message"].(string), msgPart) {
			t.Fatalf("%s: body %v", name, resp)
		}
		if param == "" && er["param"] != nil || param != "" && er["param"] != param {
			t.Fatalf("%s: param %v, want %q", name, er["param"], param)
		}
	}
	code, _, resp := post(t, e, "/v1/chat/completions", `{"model":"`+model+`"}`)
	check("missing messages", code, resp, "Bad Request", "body.messages", "1 validation error:\n  {'type': 'missing', 'loc': 'body.messages', 'msg': 'Field required'")
	code, _, resp = post(t, e, "/v1/chat/completions", `{"model":`)
	check("broken JSON", code, resp, "Bad Request", "body.9", "json_invalid")
	code, _, resp = post(t, e, "/v1/chat/completions", chatBody("hi", `,"max_tokens":40000`))
	check("max_tokens too large", code, resp, "BadRequestError", "max_tokens", "max_tokens=40000 cannot be greater than max_model_len=max_total_tokens=32768. Please request fewer output tokens. (parameter=max_tokens, value=40000)")
	code, _, resp = post(t, e, "/v1/chat/completions", chatBody("hi", `,"stream_options":{"include_usage":true}`))
	check("stream_options without stream", code, resp, "Bad Request", "body", "Stream options can only be defined when `stream=True`.")

	req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/chat/completions", strings.NewReader(chatBody("hi", "")))
	req.Header.Set("Content-Type", "text/plain")
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	var ct map[string]any
	_ = json.NewDecoder(hr.Body).Decode(&ct)
	check("text/plain body", hr.StatusCode, ct, "Bad Request", "header.content-type", "Unsupported Media Type: Only 'application/json' is allowed")
}

func TestVLLMResponseIDFollowsXRequestID(t *testing.T) {
	e := start(t, nil, nil)
	_, h, resp := post(t, e, "/v1/chat/completions", chatBody("hi", ""), "X-Request-Id", "trace-123")
	if resp["id"] != "chatcmpl-trace-123" {
		t.Fatalf("id %v", resp["id"])
	}
	if h.Get("X-Request-Id") != "" {
		t.Fatal("X-Request-Id echoed without --enable-request-id-headers")
	}
	_, _, resp = post(t, e, "/v1/completions", `{"prompt":"hi","request_id":"body-id"}`)
	if resp["id"] != "cmpl-body-id" {
		t.Fatalf("completion id %v", resp["id"])
	}
	_, _, resp = post(t, e, "/v1/chat/completions", chatBody("hi", ""))
	if !regexp.MustCompile(`^chatcmpl-[0-9a-f]{32}$`).MatchString(resp["id"].(string)) || resp["model"] != model || resp["object"] != "chat.completion" {
		t.Fatalf("random id / model / object: %v", resp)
	}

	e2 := start(t, []string{"--enable-request-id-headers"}, nil)
	_, h, _ = post(t, e2, "/v1/chat/completions", chatBody("hi", ""), "X-Request-Id", "trace-9")
	if h.Get("X-Request-Id") != "trace-9" {
		t.Fatalf("X-Request-Id header %q", h.Get("X-Request-Id"))
	}
}

func TestVLLMMaxTokensLengthVersusDefaultStop(t *testing.T) {
	e := start(t, nil, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "6"})
	_, _, resp := post(t, e, "/v1/chat/completions", chatBody("hi", ""))
	ch := resp["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "stop" || usageOf(t, resp)["completion_tokens"] != 6.0 {
		t.Fatalf("default answer: %v", resp)
	}
	_, _, resp = post(t, e, "/v1/chat/completions", chatBody("hi", `,"max_tokens":3`))
	ch = resp["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "length" || usageOf(t, resp)["completion_tokens"] != 3.0 {
		t.Fatalf("max_tokens 3: %v", resp)
	}
	if msg := ch["message"].(map[string]any); msg["content"] != " The sky is" {
		t.Fatalf("content %q", msg["content"])
	}
	_, _, resp = post(t, e, "/v1/completions", `{"prompt":"hi","max_tokens":20,"ignore_eos":true}`)
	ch = resp["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "length" || usageOf(t, resp)["completion_tokens"] != 20.0 {
		t.Fatalf("ignore_eos: %v", resp)
	}
	f := e.Scrape(t)
	if value(t, f, "vllm:request_success_total", "finished_reason", "stop") != 1 || value(t, f, "vllm:request_success_total", "finished_reason", "length") != 2 {
		t.Fatal("request_success_total by reason wrong")
	}
}

func TestVLLMModelsShape(t *testing.T) {
	e := start(t, []string{"--max-model-len", "8k"}, nil)
	_, _, resp := get(t, e, "/v1/models")
	if resp["object"] != "list" {
		t.Fatalf("%v", resp)
	}
	d := resp["data"].([]any)[0].(map[string]any)
	perm := d["permission"].([]any)[0].(map[string]any)
	if d["id"] != model || d["owned_by"] != "vllm" || d["root"] != model || d["max_model_len"] != 8000.0 || d["parent"] != nil || perm["object"] != "model_permission" {
		t.Fatalf("model card %v", d)
	}
}

func TestStreamUsageChunkRules(t *testing.T) {
	e := start(t, nil, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	hasUsageChunk := func(events []string) bool {
		for _, ev := range events {
			if strings.Contains(ev, `"choices":[],"usage":`) {
				return true
			}
		}
		return false
	}
	plain := e.Events(t, "/v1/chat/completions", chatBody("hi", `,"stream":true`))
	if hasUsageChunk(plain) || plain[len(plain)-1] != "[DONE]" {
		t.Fatalf("no stream_options: %v", plain)
	}
	// role chunk, 2 content chunks, final (EOS) chunk, [DONE]
	if len(plain) != 5 || !strings.Contains(plain[0], `"delta":{"role":"assistant","content":""}`) ||
		!strings.Contains(plain[3], `"finish_reason":"stop","stop_reason":null`) || strings.Contains(plain[1], `"usage"`) {
		t.Fatalf("chunks: %v", plain)
	}
	// vLLM 0.29.0: StreamOptions.include_usage defaults to false, so an
	// empty stream_options adds nothing (should_include_usage).
	if withEmpty := e.Events(t, "/v1/chat/completions", chatBody("hi", `,"stream":true,"stream_options":{}`)); hasUsageChunk(withEmpty) {
		t.Fatalf("stream_options {} sent a usage chunk: %v", withEmpty)
	}
	withUsage := e.Events(t, "/v1/chat/completions", chatBody("hi", `,"stream":true,"stream_options":{"include_usage":true}`))
	if !hasUsageChunk(withUsage) || withUsage[len(withUsage)-1] != "[DONE]" {
		t.Fatalf("include_usage true: %v", withUsage)
	}
	var u struct {
		Usage struct{ PromptTokens, CompletionTokens, TotalTokens int } `json:"usage"`
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(strings.ReplaceAll(withUsage[len(withUsage)-2], "prompt_tokens", "PromptTokens"), "completion_tokens", "CompletionTokens")), &u); err != nil {
		t.Fatal(err)
	}
	if u.Usage.CompletionTokens != 3 || u.Usage.PromptTokens == 0 {
		t.Fatalf("usage chunk %s", withUsage[len(withUsage)-2])
	}
	off := e.Events(t, "/v1/chat/completions", chatBody("hi", `,"stream":true,"stream_options":{"include_usage":false}`))
	if hasUsageChunk(off) {
		t.Fatalf("include_usage false still sent usage: %v", off)
	}
	comp := e.Events(t, "/v1/completions", `{"prompt":"hi","stream":true,"max_tokens":2,"stream_options":{"include_usage":true}}`)
	if len(comp) != 4 || !strings.Contains(comp[0], `"object":"text_completion"`) || !strings.Contains(comp[1], `"finish_reason":"length"`) || !hasUsageChunk(comp) {
		t.Fatalf("completion stream: %v", comp)
	}
	// Completion chunks are dumped with exclude_unset: no "usage": null.
	if !strings.HasSuffix(comp[0], `"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}`) {
		t.Fatalf("completion chunk shape: %s", comp[0])
	}
}

func TestRunningWaitingGaugesMoveWithLoad(t *testing.T) {
	e := start(t, []string{"--max-num-seqs", "2"}, map[string]string{"SIM_ENGINE_TTFT": "400ms"})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, _, _, _ = e.Post("/v1/chat/completions", chatBody("slow", `,"max_tokens":1`))
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		f := e.Scrape(t)
		if value(t, f, "vllm:num_requests_running") == 2 && value(t, f, "vllm:num_requests_waiting") == 2 {
			if value(t, f, "vllm:kv_cache_usage_perc") <= 0 {
				t.Fatal("kv_cache_usage_perc is 0 with two running sequences")
			}
			if value(t, f, "vllm:num_requests_waiting_by_reason", "reason", "capacity") != 2 {
				t.Fatal("waiting_by_reason{capacity} != waiting")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never saw running=2 waiting=2")
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	f := e.Scrape(t)
	if value(t, f, "vllm:num_requests_running") != 0 || value(t, f, "vllm:num_requests_waiting") != 0 || value(t, f, "vllm:kv_cache_usage_perc") != 0 {
		t.Fatal("gauges did not return to 0")
	}
	if q := value(t, f, "vllm:request_queue_time_seconds_sum"); q < 0.3 {
		t.Fatalf("queue time sum %v, want the two queued requests' wait (>= ~0.4s)", q)
	}
}

func TestTTFTAndITLDelays(t *testing.T) {
	const ttft, itl = 60 * time.Millisecond, 15 * time.Millisecond
	e := start(t, nil, map[string]string{"SIM_ENGINE_TTFT": ttft.String(), "SIM_ENGINE_ITL": itl.String(), "SIM_ENGINE_OUTPUT_TOKENS": "5"})
	arrivals := e.EventArrivals(t, "/v1/chat/completions", chatBody("hi", `,"stream":true`), func(line string) bool {
		return strings.HasPrefix(line, "data: {") && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"role"`)
	})
	if len(arrivals) != 5 {
		t.Fatalf("%d content chunks, want 5", len(arrivals))
	}
	if arrivals[0] < ttft {
		t.Fatalf("first token after %v, before TTFT %v", arrivals[0], ttft)
	}
	for i := 1; i < len(arrivals); i++ {
		if gap := arrivals[i] - arrivals[i-1]; gap < itl-2*time.Millisecond { // scheduling jitter on the reader side
			t.Fatalf("token %d came %v after the previous one, ITL is %v", i, gap, itl)
		}
	}
	f := e.Scrape(t)
	if s := value(t, f, "vllm:time_to_first_token_seconds_sum"); s < ttft.Seconds() {
		t.Fatalf("TTFT histogram sum %v < %v", s, ttft.Seconds())
	}
	if c := value(t, f, "vllm:inter_token_latency_seconds_count"); c != 4 {
		t.Fatalf("ITL observations %v, want 4", c)
	}
	if s := value(t, f, "vllm:inter_token_latency_seconds_sum"); s < 4*itl.Seconds() {
		t.Fatalf("ITL sum %v < %v", s, 4*itl.Seconds())
	}
}

func TestClientDisconnectCountsAbort(t *testing.T) {
	e := start(t, nil, map[string]string{"SIM_ENGINE_ITL": "200ms"})
	e.AbandonStream(t, "/v1/chat/completions", chatBody("hi", `,"stream":true`)) // after the role chunk
	deadline := time.Now().Add(5 * time.Second)
	for {
		f := e.Scrape(t)
		if value(t, f, "vllm:request_success_total", "finished_reason", "abort") == 1 && value(t, f, "vllm:num_requests_running") == 0 {
			if value(t, f, "vllm:request_success_total", "finished_reason", "stop") != 0 {
				t.Fatal("aborted request also counted as stop")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("abort never counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestVLLMMetricsMatchUpstreamTestCounts(t *testing.T) {
	// vllm tests/entrypoints/instrumentator/test_metrics.py: N completions
	// of P prompt tokens with max_tokens M.
	const N, P, M = 3, 40, 4
	e := start(t, nil, nil)
	before := e.Scrape(t)
	for i := range N {
		if code, _, resp := post(t, e, "/v1/completions", idsPrompt(ids(100*i, P), fmt.Sprintf(`,"max_tokens":%d`, M))); code != 200 {
			t.Fatalf("%d %v", code, resp)
		}
	}
	after := e.Scrape(t)
	delta := func(name string) float64 { return value(t, after, name) - value(t, before, name) }
	for name, want := range map[string]float64{
		"vllm:time_to_first_token_seconds_count":    N,
		"vllm:e2e_request_latency_seconds_count":    N,
		"vllm:request_queue_time_seconds_count":     N,
		"vllm:request_prefill_time_seconds_count":   N,
		"vllm:request_decode_time_seconds_count":    N,
		"vllm:request_inference_time_seconds_count": N,
		"vllm:request_params_n_count":               N,
		"vllm:inter_token_latency_seconds_count":    N * (M - 1),
		"vllm:request_prompt_tokens_sum":            N * P,
		"vllm:request_generation_tokens_sum":        N * M,
		"vllm:generation_tokens_total":              N * M,
		"vllm:prompt_tokens_total":                  N * P,
		"vllm:request_success_total":                N,
		"vllm:iteration_tokens_total_sum":           N * (P + M),
		"vllm:request_params_max_tokens_sum":        N * M,
	} {
		if got := delta(name); got != want {
			t.Errorf("%s rose by %v, want %v", name, got, want)
		}
	}
}

func TestVLLMHTTPInstrumentatorCountsRoutes(t *testing.T) {
	e := start(t, nil, nil)
	post(t, e, "/v1/chat/completions", chatBody("hi", ""))
	post(t, e, "/v1/chat/completions", `{"model":"nope","messages":[]}`)
	get(t, e, "/health")
	f := e.Scrape(t)
	if v := value(t, f, "http_requests_total", "handler", "/v1/chat/completions", "method", "POST", "status", "2xx"); v != 1 {
		t.Fatalf("2xx chat requests %v", v)
	}
	if v := value(t, f, "http_requests_total", "handler", "/v1/chat/completions", "status", "4xx"); v != 1 {
		t.Fatalf("4xx chat requests %v", v)
	}
	if _, ok := f.Value("http_requests_total", "handler", "/health"); ok {
		t.Fatal("/health is instrumented; the instrumentator excludes it")
	}
}

func TestVLLMAPIKeyGuardsV1Routes(t *testing.T) {
	e := start(t, []string{"--api-key", "sekret"}, nil)
	code, _, b, _ := e.Post("/v1/chat/completions", chatBody("hi", ""))
	if code != 401 || string(b) != `{"error":"Unauthorized"}` {
		t.Fatalf("no key: %d %s", code, b)
	}
	if code, _, _ := post(t, e, "/v1/chat/completions", chatBody("hi", ""), "Authorization", "Bearer sekret"); code != 200 {
		t.Fatalf("with key: %d", code)
	}
	if code, _, _ := get(t, e, "/health"); code != 200 {
		t.Fatal("/health guarded")
	}
}

func TestVLLMOrcaLoadHeader(t *testing.T) {
	e := start(t, nil, nil)
	_, h, _ := post(t, e, "/v1/chat/completions", chatBody("hi", ""), "endpoint-load-metrics-format", "TEXT")
	if got := h.Get("endpoint-load-metrics"); !strings.HasPrefix(got, "TEXT named_metrics.kv_cache_usage_perc=") || !strings.Contains(got, "named_metrics.num_requests_waiting=0.0") {
		t.Fatalf("endpoint-load-metrics %q", got)
	}
}

func TestVLLMDisableLogStatsLeavesOnlyHTTPSeries(t *testing.T) {
	e := start(t, []string{"--disable-log-stats"}, nil)
	post(t, e, "/v1/chat/completions", chatBody("hi", ""))
	f := e.Scrape(t)
	for name := range f {
		if strings.HasPrefix(name, "vllm:") {
			t.Fatalf("%s exposed with --disable-log-stats", name)
		}
	}
	if value(t, f, "http_requests_total", "handler", "/v1/chat/completions") != 1 {
		t.Fatal("instrumentator series missing")
	}
}

func TestVLLMAccessLogFollowsUvicornFlags(t *testing.T) {
	e := start(t, nil, nil)
	post(t, e, "/v1/chat/completions", chatBody("hi", ""))
	if !strings.Contains(e.Stdout.String(), `"POST /v1/chat/completions HTTP/1.1" 200 OK`) {
		t.Fatalf("no access line:\n%s", e.Stdout.String())
	}
	quiet := start(t, []string{"--disable-uvicorn-access-log"}, nil)
	post(t, quiet, "/v1/chat/completions", chatBody("hi", ""))
	if strings.Contains(quiet.Stdout.String(), "POST /v1/chat/completions") {
		t.Fatal("access line despite --disable-uvicorn-access-log")
	}
}

// A MooncakeConnector producer serves the bootstrap server a decoder's
// proxy asks for the engine id; a consumer or a plain server does not.
func TestMooncakeProducerServesTheBootstrapQuery(t *testing.T) {
	producer := start(t, []string{"--kv-transfer-config", `{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}`}, nil)
	addr := producer.Addr(DefaultMooncakeBootstrapPort)
	if addr == "" {
		t.Fatal("no listener on the bootstrap port")
	}
	resp, err := http.Get("http://" + addr + "/query")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var q map[string]map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if id, _ := q["0"]["engine_id"].(string); id == "" {
		t.Fatalf("query %v", q)
	}
	wa, _ := q["0"]["worker_addr"].(map[string]any)
	tp0, _ := wa["0"].(map[string]any)
	if addr, _ := tp0["0"].(string); !strings.HasPrefix(addr, "tcp://") {
		t.Fatalf("query lacks worker_addr {tp: {pp: tcp://...}}: %v", q)
	}
	consumer := start(t, []string{"--kv-transfer-config", `{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}`}, nil)
	if consumer.Addr(DefaultMooncakeBootstrapPort) != "" {
		t.Error("a consumer runs a bootstrap server")
	}
	other := start(t, []string{"--kv-transfer-config", `{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}`}, map[string]string{"VLLM_MOONCAKE_BOOTSTRAP_PORT": "9100"})
	if other.Addr(9100) == "" {
		t.Error("VLLM_MOONCAKE_BOOTSTRAP_PORT not honoured")
	}
}
