package sglang

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const model = "Qwen/Qwen2.5-0.5B-Instruct"

// start runs launch_server with the argv the operator renders:
// --model-path <model> --enable-metrics [extra] --host 0.0.0.0 --port 8000.
func start(t *testing.T, extra []string, env map[string]string) *enginetest.Engine {
	t.Helper()
	args := append([]string{"--model-path", model, "--enable-metrics"}, extra...)
	args = append(args, "--host", "0.0.0.0", "--port", "8000")
	e := enginetest.Start(t, Main, args, env)
	if err := e.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return e
}

// val is a series' value, 0 when it does not exist (SGLang's lazy series).
func val(f enginetest.Families, name string, labels ...string) float64 {
	v, _ := f.Value(name, labels...)
	return v
}

func post(t *testing.T, e *enginetest.Engine, path, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	code, _, b, err := e.Post(path, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s answered non-JSON %q", path, b)
	}
	return code, out
}

func ids(start, n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(start + i)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func metaOf(t *testing.T, resp map[string]any) map[string]any {
	t.Helper()
	m, ok := resp["meta_info"].(map[string]any)
	if !ok {
		t.Fatalf("no meta_info in %v", resp)
	}
	return m
}

func TestUnknownFlagExits2(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"--model-path", model, "--enable-metrics", "--bogus", "--host", "0.0.0.0", "--port", "8000"}, nil)
	code, err := e.Wait(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	out := e.Stderr.String()
	if !strings.HasPrefix(out, "usage: launch_server.py [-h] --model-path MODEL_PATH") || !strings.HasSuffix(out, "\nlaunch_server.py: error: unrecognized arguments: --bogus\n") {
		t.Fatalf("stderr:\n%s", out)
	}
}

func TestSGLangMissingModelPathExits2(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"--port", "8000"}, nil)
	if code, _ := e.Wait(5 * time.Second); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasSuffix(e.Stderr.String(), "launch_server.py: error: the following arguments are required: --model-path/--model\n") {
		t.Fatalf("stderr:\n%s", e.Stderr.String())
	}
}

func TestSGLangStartupLogsFiredUpAfterWarmup(t *testing.T) {
	e := start(t, nil, nil)
	errLog := e.Stderr.String()
	for _, want := range []string{"server_args=ServerArgs(model_path='" + model + "'", "Uvicorn running on http://0.0.0.0:8000", "The server is fired up and ready to roll!"} {
		if !strings.Contains(errLog, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errLog)
		}
	}
	// The warm-up calls the server over HTTP, so uvicorn logs it.
	out := e.Stdout.String()
	if !strings.Contains(out, `"GET /model_info HTTP/1.1" 200 OK`) || !strings.Contains(out, `"POST /generate HTTP/1.1" 200 OK`) {
		t.Fatalf("access log lacks the warm-up:\n%s", out)
	}
	if strings.Index(errLog, "Uvicorn running") > strings.Index(errLog, "fired up") {
		t.Fatal("fired-up line before the server was running")
	}
}

func TestSGLangWarmupRequestIsCounted(t *testing.T) {
	e := start(t, nil, nil)
	f := e.Scrape(t)
	n := float64(tokenize.Count(WarmupText))
	if got := val(f, "sglang:num_requests_total", "model_name", model, "engine_type", "unified"); got != 1 {
		t.Fatalf("num_requests_total after start-up = %v, want 1 (the warm-up)", got)
	}
	if got := val(f, "sglang:prompt_tokens_total"); got != n {
		t.Fatalf("prompt_tokens_total = %v, want %v", got, n)
	}
	if got := val(f, "sglang:generation_tokens_total"); got != WarmupMaxNewTokens {
		t.Fatalf("generation_tokens_total = %v, want %d", got, WarmupMaxNewTokens)
	}
	// The warm-up seeded the radix cache.
	_, resp := post(t, e, "/generate", `{"text":"`+WarmupText+`","sampling_params":{"max_new_tokens":1}}`)
	if got := metaOf(t, resp)["cached_tokens"]; got != n-1 {
		t.Fatalf("cached_tokens after the warm-up = %v, want %v", got, n-1)
	}
}

func TestSGLangSeriesAreLazy(t *testing.T) {
	e := start(t, []string{"--skip-server-warmup", "--enable-cache-report"}, nil)
	f := e.Scrape(t)
	for _, name := range []string{"sglang:num_requests_total", "sglang:prompt_tokens_total", "sglang:num_running_reqs", "sglang:cached_tokens_total", "sglang:time_to_first_token_seconds"} {
		if f[name] != nil {
			t.Fatalf("%s exists before any request", name)
		}
	}
	post(t, e, "/generate", `{"input_ids":`+ids(1, 30)+`,"sampling_params":{"max_new_tokens":2}}`)
	f = e.Scrape(t)
	if val(f, "sglang:num_requests_total") != 1 || f["sglang:num_running_reqs"] == nil || f["sglang:time_to_first_token_seconds"] == nil {
		t.Fatal("series missing after the first finished request")
	}
	if f["sglang:cached_tokens_total"] != nil {
		t.Fatal("cached_tokens_total exists without a cached token")
	}
	post(t, e, "/generate", `{"input_ids":`+ids(1, 30)+`,"sampling_params":{"max_new_tokens":2}}`)
	f = e.Scrape(t)
	if got := val(f, "sglang:cached_tokens_total"); got != 29 {
		t.Fatalf("cached_tokens_total = %v, want 29", got)
	}
	for _, lp := range f["sglang:num_running_reqs"].GetMetric()[0].GetLabel() {
		if lp.GetName() == "engine" {
			t.Fatal("SGLang series carry an engine label")
		}
	}
	if f["sglang:num_running_reqs"].GetMetric()[0].GetLabel()[2].GetName() != "moe_ep_rank" {
		t.Fatalf("scheduler labels %v", f["sglang:num_running_reqs"].GetMetric()[0].GetLabel())
	}
}

func TestSGLangMetricsNeedEnableMetrics(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"--model-path", model, "--host", "0.0.0.0", "--port", "8000"}, nil)
	if err := e.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	code, body := e.Get(t, "/metrics")
	if code != 404 || string(body) != `{"detail":"Not Found"}` {
		t.Fatalf("/metrics without --enable-metrics = %d %s", code, body)
	}
}

func TestSGLangCachedTokensNMinus1OnExactRepeat(t *testing.T) {
	e := start(t, []string{"--enable-cache-report"}, nil)
	body := enginetest.ChatBody(model, "a question that is repeated word for word", "")
	_, first := post(t, e, "/v1/chat/completions", body)
	u := first["usage"].(map[string]any)
	if u["prompt_tokens_details"] != nil {
		t.Fatalf("first request reports cached tokens: %v", u)
	}
	before := e.Scrape(t)
	_, second := post(t, e, "/v1/chat/completions", body)
	after := e.Scrape(t)
	u = second["usage"].(map[string]any)
	n := u["prompt_tokens"].(float64)
	details, _ := u["prompt_tokens_details"].(map[string]any)
	if details == nil || details["cached_tokens"] != n-1 {
		t.Fatalf("repeat usage %v, want cached_tokens %v", u, n-1)
	}
	if d := val(after, "sglang:cached_tokens_total") - val(before, "sglang:cached_tokens_total"); d != n-1 {
		t.Fatalf("cached_tokens_total +%v, want %v", d, n-1)
	}
}

func TestSGLangPageSizeAlignsCachedTokens(t *testing.T) {
	e := start(t, []string{"--page-size", "16"}, nil)
	p := `{"input_ids":` + ids(1000, 100) + `,"sampling_params":{"max_new_tokens":1}}`
	post(t, e, "/generate", p)
	_, resp := post(t, e, "/generate", p)
	if got := metaOf(t, resp)["cached_tokens"]; got != 96.0 {
		t.Fatalf("cached_tokens %v, want 96 (N-1=99 rounded down to 16-token pages)", got)
	}
}

func TestSGLangDisableRadixCache(t *testing.T) {
	e := start(t, []string{"--disable-radix-cache"}, nil)
	p := `{"input_ids":` + ids(1000, 40) + `,"sampling_params":{"max_new_tokens":1}}`
	post(t, e, "/generate", p)
	_, resp := post(t, e, "/generate", p)
	if got := metaOf(t, resp)["cached_tokens"]; got != 0.0 {
		t.Fatalf("cached_tokens %v with the radix cache off", got)
	}
}

func TestSGLangUnknownModelEchoed(t *testing.T) {
	e := start(t, nil, nil)
	code, resp := post(t, e, "/v1/chat/completions", enginetest.ChatBody("gpt-4", "hi", ""))
	if code != 200 || resp["model"] != "gpt-4" {
		t.Fatalf("unknown model: %d %v", code, resp)
	}
	code, body := e.Get(t, "/v1/models/gpt-4")
	if code != 404 || string(body) != `{"error":{"message":"The model 'gpt-4' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}` {
		t.Fatalf("/v1/models/gpt-4 = %d %s", code, body)
	}
	code, body = e.Get(t, "/v1/models/"+model)
	if code != 200 || !strings.Contains(string(body), `"owned_by":"sglang"`) {
		t.Fatalf("/v1/models/<served> = %d %s", code, body)
	}
	_, body = e.Get(t, "/v1/models")
	var list struct {
		Object string
		Data   []map[string]any
	}
	_ = json.Unmarshal(body, &list)
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0]["id"] != model || list.Data[0]["max_model_len"] != 32768.0 {
		t.Fatalf("/v1/models %s", body)
	}
	if _, ok := list.Data[0]["permission"]; ok {
		t.Fatal("SGLang model cards have no permission list")
	}
}

func TestSGLangErrorsAreFlat(t *testing.T) {
	e := start(t, nil, nil)
	code, _, b, _ := e.Post("/v1/chat/completions", `{"model":"m","messages":[]}`)
	if want := `{"object":"error","message":"Messages cannot be empty.","type":"BadRequestError","param":null,"code":400}`; code != 400 || string(b) != want {
		t.Fatalf("empty messages: %d %s", code, b)
	}
	code, resp := post(t, e, "/v1/chat/completions", `{"model":"m"}`)
	if code != 400 || resp["object"] != "error" || resp["type"] != "Bad Request" || !strings.HasPrefix(resp["message"].(string), "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'messages')") {
		t.Fatalf("missing messages: %d %v", code, resp)
	}
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
	req.Header.Set("Content-Type", "text/plain")
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	var ct map[string]any
	_ = json.NewDecoder(hr.Body).Decode(&ct)
	if hr.StatusCode != 400 || ct["type"] != "Bad Request" || !strings.Contains(ct["message"].(string), "Unsupported Media Type") {
		t.Fatalf("text/plain: %d %v", hr.StatusCode, ct)
	}
	code, resp = post(t, e, "/v1/completions", `{"prompt":"x","max_tokens":null}`)
	if code != 400 || resp["object"] != "error" {
		t.Fatalf("max_tokens null: %d %v", code, resp)
	}
	code, resp = post(t, e, "/generate", `{"sampling_params":{}}`)
	if code != 400 || resp["error"].(map[string]any)["message"] != "Either text, input_ids or input_embeds should be provided." {
		t.Fatalf("/generate without input: %d %v", code, resp)
	}
}

func TestSGLangIDsAreBareUUIDHex(t *testing.T) {
	e := start(t, nil, nil)
	_, resp := post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", ""), "X-Request-Id", "ignored")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(resp["id"].(string)) {
		t.Fatalf("id %v", resp["id"])
	}
	ch := resp["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "stop" || ch["matched_stop"] != float64(tokenize.IMEnd) {
		t.Fatalf("choice %v", ch)
	}
	_, resp = post(t, e, "/v1/completions", `{"prompt":"hi"}`)
	ch = resp["choices"].([]any)[0].(map[string]any)
	// CompletionRequest.max_tokens defaults to 16.
	if resp["object"] != "text_completion" || resp["model"] != "default" || ch["finish_reason"] != "stop" || resp["usage"].(map[string]any)["completion_tokens"] != 16.0 {
		t.Fatalf("completion %v", resp)
	}
}

func TestSGLangStreamUsageChunkRules(t *testing.T) {
	e := start(t, nil, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	hasUsage := func(ev []string) bool {
		for _, s := range ev {
			if strings.Contains(s, `"choices":[],"usage":{`) {
				return true
			}
		}
		return false
	}
	plain := e.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true`))
	// role chunk, 2 content chunks (the end-of-turn token has no text), a
	// separate final chunk, [DONE]
	if len(plain) != 5 || hasUsage(plain) || plain[4] != "[DONE]" {
		t.Fatalf("chunks: %v", plain)
	}
	// 0.5.18 encodes chat chunks with msgspec (sse_utils.py): the delta
	// starts with reasoning_content, role and content only when set; no
	// "usage" key unless set.
	if !strings.Contains(plain[0], `"delta":{"reasoning_content":null,"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`) {
		t.Fatalf("role chunk %s", plain[0])
	}
	if !strings.HasSuffix(plain[1], `"delta":{"reasoning_content":null,"content":" The"},"logprobs":null,"finish_reason":null,"matched_stop":null}]}`) {
		t.Fatalf("content chunk %s", plain[1])
	}
	if !strings.HasSuffix(plain[3], `"delta":{"reasoning_content":null},"logprobs":null,"finish_reason":"stop","matched_stop":151645}]}`) {
		t.Fatalf("final chunk %s", plain[3])
	}
	if hasUsage(e.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true,"stream_options":{}`))) {
		t.Fatal("stream_options {} sent usage; SGLang's include_usage defaults to false")
	}
	with := e.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true,"max_tokens":2,"stream_options":{"include_usage":true}`))
	if !hasUsage(with) || strings.Contains(with[2], `"finish_reason":"length"`) || !strings.Contains(with[3], `"finish_reason":"length"`) {
		t.Fatalf("include_usage: content chunks must carry finish_reason null: %v", with)
	}
	if !strings.Contains(with[4], `"usage":{"prompt_tokens":`) || !strings.HasSuffix(with[4], `"prompt_tokens_details":null,"reasoning_tokens":0}}`) {
		t.Fatalf("chat usage chunk %s", with[4])
	}
	// Content chunks never carry the reason: it comes once, in the finish
	// chunk.
	once := e.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true,"max_tokens":2`))
	if strings.Count(strings.Join(once, "\n"), `"finish_reason":"length"`) != 1 {
		t.Fatalf("length reason not sent once: %v", once)
	}
	// Completions: the last chunk carries the reason; the usage chunk is
	// dumped with exclude_none.
	comp := e.Events(t, "/v1/completions", `{"prompt":"hi","stream":true,"max_tokens":2,"stream_options":{"include_usage":true}}`)
	if len(comp) != 4 || !strings.HasSuffix(comp[1], `"finish_reason":"length","matched_stop":null}],"usage":null}`) || !strings.HasSuffix(comp[2], `"completion_tokens":2,"reasoning_tokens":0}}`) {
		t.Fatalf("completion stream %v", comp)
	}
}

// should_include_usage: a request's include_usage false does not turn off
// --stream-response-default-include-usage; continuous_usage_stats works on
// its own.
func TestSGLangUsageOptions(t *testing.T) {
	e := start(t, []string{"--stream-response-default-include-usage"}, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	ev := e.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true,"stream_options":{"include_usage":false}`))
	if !strings.Contains(ev[len(ev)-2], `"choices":[],"usage":{`) {
		t.Fatalf("server default overridden by include_usage false: %v", ev)
	}
	plain := start(t, nil, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	ev = plain.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true,"stream_options":{"continuous_usage_stats":true}`))
	// role, 2 content chunks with running usage, finish chunk, [DONE]
	if len(ev) != 5 || strings.Contains(ev[0], `"usage"`) || !strings.Contains(ev[1], `"completion_tokens":1,"prompt_tokens_details":null,"reasoning_tokens":0}}`) ||
		!strings.Contains(ev[2], `"completion_tokens":2,`) || strings.Contains(ev[3], `"usage"`) {
		t.Fatalf("continuous usage: %v", ev)
	}
	_, resp := post(t, plain, "/v1/chat/completions", enginetest.ChatBody(model, "hi", ""))
	u, _ := resp["usage"].(map[string]any)
	ch := resp["choices"].([]any)[0].(map[string]any)
	if _, ok := u["reasoning_tokens"]; !ok {
		t.Fatalf("usage lacks reasoning_tokens: %v", resp)
	}
	if _, ok := ch["hidden_states"]; ok {
		t.Fatalf("choice keeps hidden_states: None is dropped by its serializer: %v", resp)
	}
}

// launch_server loads the model before it starts the HTTP server, so the
// port refuses connections during the load; /health answers 503 during the
// warm-up that follows (server_status Starting), 200 after.
func TestStartupDelayHealth(t *testing.T) {
	e := enginetest.Start(t, Main, []string{"--model-path", model, "--enable-metrics", "--host", "0.0.0.0", "--port", "8000"},
		map[string]string{"SIM_ENGINE_STARTUP_DELAY": "300ms", "SIM_ENGINE_TTFT": "300ms"})
	time.Sleep(100 * time.Millisecond)
	if e.Listening() {
		t.Fatal("listening while the model loads")
	}
	deadline := time.Now().Add(2 * time.Second)
	for !e.Listening() {
		if time.Now().After(deadline) {
			t.Fatal("never listened")
		}
		time.Sleep(time.Millisecond)
	}
	// The warm-up /generate takes a TTFT: /health is 503 meanwhile.
	if code, _ := e.Get(t, "/health"); code != 503 {
		t.Fatalf("/health during the warm-up = %d, want 503", code)
	}
	if code, _ := e.Get(t, "/v1/models"); code != 200 {
		t.Fatalf("/v1/models during the warm-up = %d, want 200", code)
	}
	if err := e.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Stderr.String(), "fired up") {
		t.Fatal("ready before the fired-up line")
	}
}

func TestRunningWaitingGaugesMoveWithLoad(t *testing.T) {
	e := start(t, []string{"--max-running-requests", "2"}, map[string]string{"SIM_ENGINE_TTFT": "400ms"})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, _, _, _ = e.Post("/v1/chat/completions", enginetest.ChatBody(model, "slow", `,"max_tokens":1`))
		})
	}
	type load struct {
		NumReqs          int      `json:"num_reqs"`
		NumWaitingReqs   int      `json:"num_waiting_reqs"`
		NumTokens        int      `json:"num_tokens"`
		NumPendingTokens *int     `json:"num_pending_tokens"`
		TsTic            *float64 `json:"ts_tic"`
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := e.Get(t, "/get_load")
		var l []load
		if err := json.Unmarshal(body, &l); err != nil || len(l) != 1 {
			t.Fatalf("/get_load %s", body)
		}
		if l[0].NumPendingTokens == nil || l[0].TsTic == nil || *l[0].NumPendingTokens > l[0].NumTokens {
			t.Fatalf("/get_load lacks 0.5.18's num_pending_tokens / ts_tic: %s", body)
		}
		if l[0].NumReqs == 4 && l[0].NumWaitingReqs == 2 && l[0].NumTokens > 0 && *l[0].NumPendingTokens > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw 4 requests with 2 waiting: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	_, body := e.Get(t, "/get_load")
	if !strings.Contains(string(body), `"num_reqs":0,"num_waiting_reqs":0,"num_tokens":0,"num_pending_tokens":0,"ts_tic":`) {
		t.Fatalf("/get_load after the load: %s", body)
	}
}

func TestSGLangSchedulerGaugesAreWrittenAtPrefillLogs(t *testing.T) {
	e := start(t, []string{"--max-running-requests", "1"}, map[string]string{"SIM_ENGINE_TTFT": "200ms"})
	var wg sync.WaitGroup
	send := func() {
		wg.Go(func() {
			_, _, _, _ = e.Post("/v1/chat/completions", enginetest.ChatBody(model, "slow", `,"max_tokens":1`))
		})
	}
	send() // A runs
	waitLoad := func(reqs int) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, body := e.Get(t, "/get_load")
			if strings.Contains(string(body), fmt.Sprintf(`"num_reqs":%d,`, reqs)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never saw %d requests: %s", reqs, body)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitLoad(1)
	send() // B waits
	waitLoad(2)
	send() // C waits
	waitLoad(3)
	// A's prefill log ran when nothing else was there.
	if got := val(e.Scrape(t), "sglang:num_queue_reqs"); got != 0 {
		t.Fatalf("num_queue_reqs = %v before any later prefill, want the stale 0", got)
	}
	// When A finishes, B's prefill log sees C still queued.
	deadline := time.Now().Add(5 * time.Second)
	for val(e.Scrape(t), "sglang:num_queue_reqs") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("B's prefill log never showed C queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
}

func TestSGLangCacheHitRateIsLastPrefillAndResetByDecodeLog(t *testing.T) {
	e := start(t, []string{"--decode-log-interval", "4"}, nil)
	p := `{"input_ids":` + ids(500, 50) + `,"sampling_params":{"max_new_tokens":1}}`
	post(t, e, "/generate", p)
	post(t, e, "/generate", p) // a prefill with 49 of 50 cached, no decode step
	if got := val(e.Scrape(t), "sglang:cache_hit_rate"); got != 0.98 {
		t.Fatalf("cache_hit_rate after a cached prefill = %v, want 49/50", got)
	}
	post(t, e, "/generate", `{"input_ids":`+ids(500, 50)+`,"sampling_params":{"max_new_tokens":6,"ignore_eos":true}}`)
	if got := val(e.Scrape(t), "sglang:cache_hit_rate"); got != 0 {
		t.Fatalf("cache_hit_rate after a decode stats log = %v, want 0", got)
	}
}

func TestSGLangNonStreamingTTFTIsObservedAtFirstOutput(t *testing.T) {
	e := start(t, []string{"--skip-server-warmup"}, map[string]string{"SIM_ENGINE_TTFT": "10ms", "SIM_ENGINE_ITL": "5ms"})
	post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", ""))
	f := e.Scrape(t)
	// A non-streaming answer of 16 tokens reaches the tokenizer manager once,
	// at the end: TTFT is then the whole latency and no ITL is recorded.
	if s := val(f, "sglang:time_to_first_token_seconds_sum"); s < 0.010+15*0.005 {
		t.Fatalf("non-streaming TTFT %v, want >= 85ms", s)
	}
	if c, _ := f.Value("sglang:inter_token_latency_seconds_count"); c != 0 {
		t.Fatalf("non-streaming ITL count %v", c)
	}
	e.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true`))
	f = e.Scrape(t)
	if c := val(f, "sglang:inter_token_latency_seconds_count"); c != 15 {
		t.Fatalf("streaming ITL count %v, want 15", c)
	}
	if c := val(f, "sglang:time_to_first_token_seconds_count"); c != 2 {
		t.Fatalf("TTFT count %v", c)
	}
}

func TestSGLangGenerateNativeShape(t *testing.T) {
	e := start(t, nil, nil)
	_, resp := post(t, e, "/generate", `{"text":"hello there","sampling_params":{"max_new_tokens":3},"rid":"my-rid"}`)
	meta := metaOf(t, resp)
	fr, _ := meta["finish_reason"].(map[string]any)
	if resp["text"] != " The sky is" || len(resp["output_ids"].([]any)) != 3 || meta["id"] != "my-rid" || fr["type"] != "length" || fr["length"] != 3.0 ||
		meta["prompt_tokens"] != float64(tokenize.Count("hello there")) || meta["completion_tokens"] != 3.0 {
		t.Fatalf("/generate %v", resp)
	}
	events := e.Events(t, "/generate", `{"text":"hello there","sampling_params":{"max_new_tokens":2},"stream":true}`)
	if len(events) != 3 || events[2] != "[DONE]" || !strings.Contains(events[0], `"finish_reason":null`) || !strings.Contains(events[1], `"text":" The sky"`) {
		t.Fatalf("/generate stream %v", events)
	}
}

func TestSGLangFlushCacheDropsTheTree(t *testing.T) {
	e := start(t, nil, nil)
	p := `{"input_ids":` + ids(7, 20) + `,"sampling_params":{"max_new_tokens":1}}`
	post(t, e, "/generate", p)
	if code, body := e.Get(t, "/flush_cache"); code != 200 || !strings.HasPrefix(string(body), "Cache flushed.") {
		t.Fatalf("/flush_cache %d %s", code, body)
	}
	_, resp := post(t, e, "/generate", p)
	if got := metaOf(t, resp)["cached_tokens"]; got != 0.0 {
		t.Fatalf("cached_tokens after a flush = %v", got)
	}
}

func TestSGLangExtraAndCustomLabels(t *testing.T) {
	e := start(t, []string{"--extra-metric-labels", `{"replica":"r1"}`, "--tokenizer-metrics-allowed-custom-labels", "test_id"}, nil)
	post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", ""), "x-custom-labels", `{"test_id":"abc","other":"x"}`)
	f := e.Scrape(t)
	if got := val(f, "sglang:num_requests_total", "replica", "r1", "test_id", "abc"); got != 1 {
		t.Fatalf("custom-labelled request count %v", got)
	}
	if got := val(f, "sglang:num_requests_total", "test_id", ""); got != 1 { // the warm-up had no header
		t.Fatalf("unlabelled (warm-up) count %v", got)
	}
	if val(f, "sglang:num_running_reqs", "replica", "r1") != 0 || f["sglang:num_running_reqs"] == nil {
		t.Fatal("scheduler series lack the extra label")
	}
}

func TestClientDisconnectCountsAbort(t *testing.T) {
	e := start(t, []string{"--skip-server-warmup"}, map[string]string{"SIM_ENGINE_ITL": "200ms"})
	e.AbandonStream(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stream":true`))
	deadline := time.Now().Add(5 * time.Second)
	for val(e.Scrape(t), "sglang:num_aborted_requests_total") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("abort never counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f := e.Scrape(t); f["sglang:num_requests_total"] != nil {
		t.Fatal("the aborted request was counted as finished")
	}
}

func TestSGLangLoadsEndpoint(t *testing.T) {
	e := start(t, nil, nil)
	_, body := e.Get(t, "/v1/loads")
	var out struct {
		DPRankCount int              `json:"dp_rank_count"`
		Loads       []map[string]any `json:"loads"`
		Aggregate   map[string]any   `json:"aggregate"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.DPRankCount != 1 || len(out.Loads) != 1 || out.Loads[0]["max_total_num_tokens"] != 131072.0 || out.Aggregate["total_reqs"] != 0.0 {
		t.Fatalf("/v1/loads %s", body)
	}
	if code, _ := e.Get(t, "/v1/loads?include=bogus"); code != 400 {
		t.Fatalf("bad include answered %d", code)
	}
}

func TestSGLangLogLevelWarningSilencesInfo(t *testing.T) {
	e := start(t, []string{"--log-level", "warning"}, nil)
	post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", ""))
	if strings.Contains(e.Stderr.String(), "fired up") || strings.Contains(e.Stdout.String(), "POST") {
		t.Fatalf("info lines at --log-level warning:\nstderr:\n%s\nstdout:\n%s", e.Stderr.String(), e.Stdout.String())
	}
}

func TestTTFTAndITLDelays(t *testing.T) {
	const ttft, itl = 60 * time.Millisecond, 15 * time.Millisecond
	e := start(t, []string{"--skip-server-warmup"}, map[string]string{"SIM_ENGINE_TTFT": ttft.String(), "SIM_ENGINE_ITL": itl.String(), "SIM_ENGINE_OUTPUT_TOKENS": "5"})
	arrivals := e.EventArrivals(t, "/v1/completions", `{"prompt":"hi","stream":true,"max_tokens":5,"ignore_eos":true}`, func(line string) bool {
		return strings.HasPrefix(line, "data: {")
	})
	if len(arrivals) != 5 {
		t.Fatalf("%d chunks, want 5", len(arrivals))
	}
	if arrivals[0] < ttft {
		t.Fatalf("first token after %v, before TTFT %v", arrivals[0], ttft)
	}
	for i := 1; i < len(arrivals); i++ {
		if gap := arrivals[i] - arrivals[i-1]; gap < itl-2*time.Millisecond {
			t.Fatalf("token %d came %v after the previous one, ITL is %v", i, gap, itl)
		}
	}
	f := e.Scrape(t)
	if s := val(f, "sglang:time_to_first_token_seconds_sum"); s < ttft.Seconds() {
		t.Fatalf("TTFT sum %v", s)
	}
	if s := val(f, "sglang:inter_token_latency_seconds_sum"); s < 4*itl.Seconds() {
		t.Fatalf("ITL sum %v", s)
	}
}

func TestSGLangPrefillNodeRecordsNoTTFTAndReportsBootstrapPort(t *testing.T) {
	e := start(t, []string{"--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "8998"}, nil)
	post(t, e, "/generate", `{"input_ids":`+ids(1, 10)+`,"sampling_params":{"max_new_tokens":1}}`)
	f := e.Scrape(t)
	if f["sglang:time_to_first_token_seconds"] != nil {
		t.Fatal("a prefill node recorded TTFT")
	}
	if val(f, "sglang:num_requests_total", "engine_type", "prefill") != 2 { // warm-up + ours
		t.Fatal("requests not counted with engine_type=prefill")
	}
	_, body := e.Get(t, "/server_info")
	if !strings.Contains(string(body), `"disaggregation_bootstrap_port":8998`) || !strings.Contains(string(body), `"disaggregation_mode":"prefill"`) {
		t.Fatalf("/server_info %s", body)
	}
}
