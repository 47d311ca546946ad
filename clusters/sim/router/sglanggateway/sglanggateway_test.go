package sglanggateway

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

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = routertest.Namespace

var selector = routertest.Selector()

// logs is the router's stdout without ANSI colour.
var logs = (*routertest.Router).Logs

type workerList struct {
	Workers []struct {
		URL     string `json:"url"`
		ModelID string `json:"model_id"`
	} `json:"workers"`
}

func registered(t *testing.T, r *routertest.Router) workerList {
	t.Helper()
	var l workerList
	_, _, b := routertest.Get(t, r.Base()+"/workers")
	_ = json.Unmarshal(b, &l)
	return l
}

func startSG(t *testing.T, es []*routertest.Engine, pods *routertest.Pods, extra ...string) *routertest.Router {
	t.Helper()
	return routertest.StartOverFleet(t, Main, es, pods, map[string]string{"SIM_ROUTER_SEED": "3"},
		func(r *routertest.Router) int { return len(registered(t, r).Workers) }, extra...)
}

func TestSGBannerHasNoKvConnector(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	out := logs(r)
	want := fmt.Sprintf("Starting router on 0.0.0.0:%d | mode: Regular { worker_urls: [] } | policy: CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 } | max_payload: 512MB\n", r.Port)
	if !strings.Contains(out, want) || strings.Contains(out, "kv_connector") {
		t.Fatalf("banner: want %q in\n%s", want, out)
	}
	if !regexp.MustCompile(`\x1b\[32m INFO\x1b\[0m \x1b\[2msmg::server\x1b\[0m\x1b\[2m:\x1b\[0m \x1b\[2msrc/server\.rs\x1b\[0m\x1b\[2m:\x1b\[0m\x1b\[2m709:\x1b\[0m Starting router on `).MatchString(r.Stdout.String()) {
		t.Fatalf("banner not in tracing format:\n%q", r.Stdout.String())
	}
	head := "INFO: IGW mode automatically enabled because service discovery is turned on\nSGLang Router starting...\n" +
		fmt.Sprintf("Host: 0.0.0.0:%d\nMode: IGW (Inference Gateway)\n", r.Port)
	if !strings.HasPrefix(out, head) {
		t.Fatalf("stdout head:\n%s\nwant prefix:\n%s", out, head)
	}
	if strings.Contains(out, "\nPolicy: ") {
		t.Fatalf("IGW prints no Policy line")
	}
	for _, line := range []string{
		"Service discovery started", "Router ready | workers: [" /* discovery runs concurrently, so the Pod may be listed already */, fmt.Sprintf("Starting server on 0.0.0.0:%d", r.Port),
		"Adding pod: md-server-0 | type: Some(Regular) | url: " + es[0].URL(),
		"Activated 1 worker(s) (marked as healthy)",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("missing %q", line)
		}
	}
}

func TestSGBannerPolicyDebugForms(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	for policyArg, want := range map[string]string{
		"prefix_hash": "policy: PrefixHash { prefix_token_count: 256, load_factor: 1.25 } | max_payload",
		"manual":      "policy: Manual { eviction_interval_secs: 120, max_idle_secs: 14400 } | max_payload",
		"round_robin": "policy: RoundRobin | max_payload",
	} {
		r := startSG(t, es, pods, "--policy", policyArg)
		if !strings.Contains(logs(r), want) {
			t.Errorf("%s: want %q in\n%s", policyArg, want, logs(r))
		}
		r.Stop(t)
	}
}

func TestPolicyValidOnlyOnOtherRouterRefused(t *testing.T) {
	for _, p := range []string{"consistent_hash", "rendezvous_hash"} {
		r := routertest.Start(t, Main, routertest.OperatorArgs(8000, "--policy", p), nil, routertest.NewPods())
		if code := r.Wait(t, 5*time.Second); code != 2 {
			t.Fatalf("exit %d", code)
		}
		want := "error: invalid value '" + p + "' for '--policy <POLICY>'\n" +
			"  [possible values: random, round_robin, cache_aware, power_of_two, prefix_hash, manual]\n\n" +
			"For more information, try '--help'.\n"
		if r.Stderr.String() != want {
			t.Fatalf("stderr %q\nwant %q", r.Stderr.String(), want)
		}
		if r.Stdout.String() != "" {
			t.Fatalf("SG prints nothing before clap: %q", r.Stdout.String())
		}
	}
}

func TestSGBadDecodePolicyWithTip(t *testing.T) {
	r := routertest.Start(t, Main, routertest.OperatorArgs(8000, "--decode-policy=power_of_tw"), nil, routertest.NewPods())
	if code := r.Wait(t, 5*time.Second); code != 2 {
		t.Fatalf("exit %d", code)
	}
	want := "error: invalid value 'power_of_tw' for '--decode-policy <DECODE_POLICY>'\n" +
		"  [possible values: random, round_robin, cache_aware, power_of_two, prefix_hash, manual]\n\n" +
		"  tip: a similar value exists: 'power_of_two'\n\n" +
		"For more information, try '--help'.\n"
	if r.Stderr.String() != want {
		t.Fatalf("stderr %q", r.Stderr.String())
	}
}

func TestSGChatRoutesOnJoinedMessages(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startSG(t, es, pods)
	shared := strings.Repeat("You are a careful assistant. ", 20)
	chat := func(user string) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
			map[string]any{"role": "system", "content": shared},
			map[string]any{"role": "user", "content": user}}})
		return string(b)
	}
	post := func(body string) {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", body, nil); st != 200 {
			t.Errorf("status %d %s", st, b)
		}
	}
	post(chat("first question"))
	first, other := es[0], es[1]
	if es[1].Generations() == 1 {
		first, other = es[1], es[0]
	}
	// Keep one request in flight on the first worker.
	release := first.Hold()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); post(chat("second question")) }()
	routertest.Eventually(t, 5*time.Second, func() bool { return first.InFlight() == 1 }, "shared-prefix chat did not go to the first worker")
	// Unrelated text: no match, least load -> the other worker.
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("zebra ", 30)}}})
	post(string(b))
	if other.Generations() != 1 {
		t.Fatalf("unrelated chat went to %d/%d", first.Generations(), other.Generations())
	}
	// Shared prefix again: prefix match beats the in-flight load.
	wg.Add(1)
	go func() { defer wg.Done(); post(chat("third question")) }()
	routertest.Eventually(t, 5*time.Second, func() bool { return first.InFlight() == 2 }, "prefix match did not win over load")
	release()
	wg.Wait()
	if first.Generations() != 3 || other.Generations() != 1 {
		t.Fatalf("split %d/%d", first.Generations(), other.Generations())
	}
}

func TestRoundRobin120Gives60And60WithSelectionMetrics(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startSG(t, es, pods, "--policy=round_robin")
	for i := 0; i < 120; i++ {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", i%3 == 0), nil); st != 200 {
			t.Fatalf("status %d %s", st, b)
		}
	}
	if a, b := es[0].Generations(), es[1].Generations(); a != 60 || b != 60 {
		t.Fatalf("split %d/%d", a, b)
	}
	mfs := r.Metrics(t)
	if v, _ := routertest.Value(mfs, "smg_worker_selection_total", map[string]string{"policy": "round_robin", "worker_type": "regular", "connection_mode": "http", "model": "m"}); v != 120 {
		t.Fatalf("selection_total %v", v)
	}
	if v, _ := routertest.Value(mfs, "smg_router_requests_total", map[string]string{"router_type": "http", "backend_type": "regular", "model": "m", "endpoint": "chat", "streaming": "false"}); v != 80 {
		t.Fatalf("router_requests non-stream %v", v)
	}
	if v, _ := routertest.Value(mfs, "smg_router_requests_total", map[string]string{"streaming": "true"}); v != 40 {
		t.Fatalf("router_requests stream %v", v)
	}
	if _, ok := mfs["smg_worker_requests_active"]; ok {
		t.Fatalf("requests_active exists under round_robin")
	}
	if v, _ := routertest.Value(mfs, "smg_worker_pool_size", map[string]string{"worker_type": "regular", "model": "m"}); v != 2 {
		t.Fatalf("pool size %v", v)
	}
	// start_prometheus describes the metrics before it installs the
	// recorder: no family has a HELP line (as the wheel's /metrics shows).
	if h := mfs["smg_worker_selection_total"].Help; h != nil {
		t.Fatalf("HELP %q; the gateway's exporter knows no description", *h)
	}
}

func TestSGPrefixHash503WithErrorCode(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startSG(t, es, pods, "--policy", "prefix_hash", "--retry-initial-backoff-ms=1", "--retry-max-backoff-ms=2")
	st, h, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	want := `{"error":{"type":"Service Unavailable","code":"no_available_workers","message":"No available workers (all circuits open or unhealthy)"}}`
	if st != 503 || string(b) != want || h.Get("X-SMG-Error-Code") != "no_available_workers" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %v", st, b, h)
	}
	if es[0].Generations()+es[1].Generations() != 0 {
		t.Fatalf("a worker was called")
	}
	mfs := r.Metrics(t)
	if v, _ := routertest.Value(mfs, "smg_prefix_hash_policy_branch_total", map[string]string{"branch": "no_tokens"}); v != 5 {
		t.Fatalf("branch no_tokens %v", v)
	}
	if mfs["smg_prefix_hash_policy_branch_total"].Help != nil {
		t.Fatalf("HELP on a metric the gateway never describes")
	}
	if v, _ := routertest.Value(mfs, "smg_worker_retries_total", map[string]string{"worker_type": "regular", "endpoint": "chat"}); v != 4 {
		t.Fatalf("retries %v", v)
	}
	if v, _ := routertest.Value(mfs, "smg_http_responses_total", map[string]string{"status_code": "503", "error_code": "no_available_workers"}); v != 1 {
		t.Fatalf("http responses %v", v)
	}
	if _, ok := mfs["smg_worker_selection_total"]; ok {
		t.Fatalf("selection recorded without a pick")
	}
}

func TestSGUnknownModelAndNoWorkers(t *testing.T) {
	// No workers at all: no router qualifies -> 404 text.
	r0 := routertest.Start(t, Main, routertest.OperatorArgs(8000, "--retry-max-retries=2"), nil, routertest.NewPods())
	r0.WaitReady(t, "/liveness", 5*time.Second)
	st, _, b := routertest.Post(t, r0.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	if st != 404 || string(b) != "Model 'm' not found or no router available" {
		t.Fatalf("%d %s", st, b)
	}
	if st, _, b := routertest.Get(t, r0.Base()+"/v1/models"); st != 503 || string(b) != "No models available" {
		t.Fatalf("models %d %s", st, b)
	}
	if st, _, b := routertest.Get(t, r0.Base()+"/readiness"); st != 503 || string(b) != `{"status":"not ready","reason":"insufficient healthy workers"}` {
		t.Fatalf("readiness %d %s", st, b)
	}

	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods, "--retry-initial-backoff-ms=1", "--retry-max-backoff-ms=2")
	// Unknown model: the default router finds no worker for it -> 503.
	st, h, _ := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("other", "hi", false), nil)
	if st != 503 || h.Get("X-SMG-Error-Code") != "no_available_workers" {
		t.Fatalf("unknown model %d", st)
	}
	// No model in a chat: "unknown" -> 503 as well.
	st, _, _ = routertest.Post(t, r.Base()+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, nil)
	if st != 503 {
		t.Fatalf("no model %d", st)
	}
	// The served model works and /v1/models lists it from the registry,
	// asking no engine: what sglang-router 0.3.1 from PyPI answers in IGW
	// mode too (docs/routers.md#get-v1models-through-each-router).
	if st, _, _ := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil); st != 200 {
		t.Fatalf("served model %d", st)
	}
	if st, h, b := routertest.Get(t, r.Base()+"/v1/models"); st != 200 || string(b) != `{"object":"list","data":[{"id":"m","object":"model","owned_by":"local"}]}` ||
		h.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("models %d %q %s", st, h.Get("Content-Type"), b)
	}
	if es[0].Count("/v1/models") != 0 || es[0].Count("/server_info") != 1 {
		t.Fatalf("models proxied or metadata not read: %d %d", es[0].Count("/v1/models"), es[0].Count("/server_info"))
	}
	if st, _, b := routertest.Get(t, r.Base()+"/readiness"); st != 200 || string(b) != `{"status":"ready","healthy_workers":1,"total_workers":1}` {
		t.Fatalf("readiness %d %s", st, b)
	}
}

func TestSGFallbackIs404AndHealthOK(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	// The fallback sits outside the request-id and HTTP-metrics layers.
	st, h, b := routertest.Get(t, r.Base()+"/tokenize/x")
	if st != 404 || len(b) != 0 || h.Get("X-Request-Id") != "" {
		t.Fatalf("fallback %d %q %v", st, b, h)
	}
	if es[0].Count("/tokenize/x") != 0 {
		t.Fatalf("fallback proxied")
	}
	for _, p := range []string{"/health", "/liveness", "/get_model_info"} {
		if st, h, b := routertest.Get(t, r.Base()+p); st != 200 || (p != "/get_model_info" && string(b) != "OK") || h.Get("X-Request-Id") == "" {
			t.Fatalf("%s %d %s %v", p, st, b, h)
		}
	}
	mfs := r.Metrics(t)
	if _, ok := routertest.Value(mfs, "smg_http_requests_total", map[string]string{"path": "/tokenize/x"}); ok {
		t.Errorf("the fallback counted in smg_http_requests_total")
	}
	if _, ok := routertest.Value(mfs, "smg_http_responses_total", map[string]string{"status_code": "404"}); ok {
		t.Errorf("the fallback counted in smg_http_responses_total")
	}
	// Only segments past the second are ids: /get_model_info is itself.
	if v, _ := routertest.Value(mfs, "smg_http_requests_total", map[string]string{"path": "/get_model_info"}); v != 1 {
		t.Errorf("/get_model_info counted %v times under its own path", v)
	}
	for in, want := range map[string]string{"/get_model_info": "/get_model_info", "/v1/responses/resp_0123456789": "/v1/responses/{id}", "/workers/42": "/workers/42", "/v1/workers/42": "/v1/workers/{id}"} {
		if got := normalizePath(in); got != want {
			t.Errorf("normalizePath(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestSGForwardsOnlyListedHeaders(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), map[string]string{
		"Authorization": "Bearer k", "X-Custom": "c", "X-Request-Id-Extra": "e", "X-SMG-Routing-Key": "rk", "traceparent": "00-a-b-01"})
	h := es[0].LastHeaders()
	if h.Get("Authorization") != "Bearer k" || h.Get("X-Request-Id-Extra") != "e" || h.Get("X-Smg-Routing-Key") != "rk" || h.Get("traceparent") != "00-a-b-01" || h.Get("X-Custom") != "" {
		t.Fatalf("forwarded %v", h)
	}
}

func TestStreamingRelayedUnchanged(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	st, h, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", true), nil)
	if st != 200 || h.Get("Content-Type") != "text/event-stream" || string(b) != strings.Join(routertest.StreamChunks("w0"), "") {
		t.Fatalf("%d %q %q", st, h.Get("Content-Type"), b)
	}
	if !regexp.MustCompile(`^chatcmpl-[A-Za-z0-9]{24}$`).MatchString(h.Get("x-request-id")) {
		t.Fatalf("request id %q", h.Get("x-request-id"))
	}
}

func TestSGWorkerRequestsActiveOnlyUnderCacheAware(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	release := es[0].Hold()
	done := make(chan struct{})
	go func() {
		defer close(done)
		routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	}()
	routertest.Eventually(t, 5*time.Second, func() bool { return es[0].InFlight() == 1 }, "not in flight")
	if v, ok := routertest.Value(r.Metrics(t), "smg_worker_requests_active", map[string]string{"worker": es[0].URL()}); !ok || v != 1 {
		t.Fatalf("active %v %v", v, ok)
	}
	release()
	<-done
	routertest.Eventually(t, 5*time.Second, func() bool {
		v, _ := routertest.Value(r.Metrics(t), "smg_worker_requests_active", map[string]string{"worker": es[0].URL()})
		return v == 0
	}, "active not back to 0")
}

func TestSGDiscoveryRemovesDeletedPod(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startSG(t, es, pods)
	pods.Update(ns, "md-server-1", func(p *proc.Pod) { p.Deleting = true })
	routertest.Eventually(t, 5*time.Second, func() bool { return len(registered(t, r).Workers) == 1 }, "not removed")
	if !strings.Contains(logs(r), "Removing pod: md-server-1 | type: Some(Regular) | url: "+es[1].URL()) {
		t.Fatalf("no removal line")
	}
	mfs := r.Metrics(t)
	if v, _ := routertest.Value(mfs, "smg_worker_pool_size", map[string]string{"model": "m"}); v != 1 {
		t.Fatalf("pool %v", v)
	}
}

func TestObserverEndpointsShape(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startSG(t, es, pods)
	_, _, b := routertest.Get(t, r.Base()+"/observer/endpoints")
	var v struct {
		Router struct {
			BootGeneration *int64 `json:"boot_generation"`
			NowMs          *int64 `json:"now_ms"`
		} `json:"router"`
		RegistryRevision *uint64 `json:"registry_revision"`
		Workers          []struct {
			URL       string `json:"url"`
			Port      int    `json:"port"`
			Role      string `json:"role"`
			PodHint   string `json:"pod_hint"`
			WorkerID  string `json:"worker_id"`
			Selection struct {
				Registered, Healthy, CircuitOpen, InSelection *bool
			} `json:"selection"`
		} `json:"workers"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Router.BootGeneration == nil || v.Router.NowMs == nil || v.RegistryRevision == nil || len(v.Workers) != 2 {
		t.Fatalf("%v %s", err, b)
	}
	for _, w := range v.Workers {
		if w.Role != "regular" || w.Port != es[0].Port || w.WorkerID == "" || w.PodHint == "" {
			t.Fatalf("%s", b)
		}
	}
	if !strings.Contains(string(b), `"selection":{"registered":true,"healthy":true,"circuit_open":false,"in_selection":true}`) {
		t.Fatalf("selection shape %s", b)
	}
}

// startSGPD runs the gateway over nPre prefill and nDec decode engines as
// the operator renders a pair, and waits until all are registered.
func startSGPD(t *testing.T, nPre, nDec int, extra ...string) (*routertest.Router, []*routertest.Engine, []*routertest.Engine) {
	t.Helper()
	pods := routertest.NewPods()
	pre, dec := routertest.PDFleet(t, nPre, nDec, pods, "sglang.ai/bootstrap-port")
	r := routertest.Start(t, Main, routertest.PDArgs(pre[0].Port, "--pd-disaggregation", extra...), map[string]string{"SIM_ROUTER_SEED": "3"}, pods)
	r.WaitReady(t, "/liveness", 5*time.Second)
	routertest.Eventually(t, 5*time.Second, func() bool { return len(registered(t, r).Workers) == nPre+nDec }, "pd workers not registered")
	return r, pre, dec
}

func TestSGPDDualDispatchWithBootstrap(t *testing.T) {
	r, pres, decs := startSGPD(t, 1, 1, "--policy", "round_robin")
	pre, dec := pres[0], decs[0]
	st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	if st != 200 || !strings.Contains(string(b), `"worker":"d0"`) {
		t.Fatalf("%d %s", st, b)
	}
	var sent map[string]any
	_ = json.Unmarshal(pre.LastBody(), &sent)
	if sent["bootstrap_host"] != pre.IP || sent["bootstrap_port"] != float64(8998) || sent["bootstrap_room"] == nil {
		t.Fatalf("bootstrap fields %v", sent)
	}
	if dec.Generations() != 1 || pre.Generations() != 1 {
		t.Fatalf("dispatch %d/%d", pre.Generations(), dec.Generations())
	}
	mfs := r.Metrics(t)
	for _, wt := range []string{"prefill", "decode"} {
		if v, _ := routertest.Value(mfs, "smg_worker_selection_total", map[string]string{"worker_type": wt, "policy": "round_robin"}); v != 1 {
			t.Fatalf("%s selection %v", wt, v)
		}
	}
	if !strings.Contains(logs(r), "mode: PrefillDecode { prefill_urls: [], decode_urls: [], prefill_policy: None, decode_policy: None }") {
		t.Fatalf("pd banner:\n%s", logs(r))
	}
}

// Under --service-discovery the gateway runs in IGW mode, whose router
// manager builds the PD router from --policy alone: the pool flags show in
// the banner and route nothing. Each pool still has its own instance.
func TestSGPDIGWIgnoresPoolPolicyFlags(t *testing.T) {
	r, pre, dec := startSGPD(t, 2, 2, "--policy", "round_robin", "--prefill-policy", "cache_aware", "--decode-policy", "cache_aware")
	for i := 0; i < 8; i++ {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", fmt.Sprint("q", i), false), nil); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, b)
		}
	}
	count := func(es []*routertest.Engine) string { return fmt.Sprint(es[0].Generations(), es[1].Generations()) }
	if p, d := count(pre), count(dec); p != "4 4" || d != "4 4" {
		t.Fatalf("prefill %s decode %s, want 4 4 and 4 4", p, d)
	}
	mfs := r.Metrics(t)
	for _, wt := range []string{"prefill", "decode"} {
		if v, _ := routertest.Value(mfs, "smg_worker_selection_total", map[string]string{"worker_type": wt, "policy": "round_robin"}); v != 8 {
			t.Errorf("%s selections under round_robin = %v, want 8", wt, v)
		}
	}
	if !strings.Contains(logs(r), "prefill_policy: Some(CacheAware { cache_threshold: 0.3") {
		t.Fatalf("banner:\n%s", logs(r))
	}
}

// The PD router holds a load guard on both workers whatever the policy:
// a stream too (smg_worker_requests_active moves under round_robin).
func TestSGPDStreamHoldsLoadOnBothWorkers(t *testing.T) {
	r, pres, decs := startSGPD(t, 1, 1, "--policy", "round_robin")
	release := decs[0].Hold()
	defer release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "s", true), nil)
	}()
	active := func(e *routertest.Engine) float64 {
		v, _ := routertest.Value(r.Metrics(t), "smg_worker_requests_active", map[string]string{"worker": e.URL()})
		return v
	}
	routertest.Eventually(t, 5*time.Second, func() bool { return active(pres[0]) == 1 && active(decs[0]) == 1 }, "load not held on both workers")
	release()
	<-done
	routertest.Eventually(t, 5*time.Second, func() bool { return active(pres[0]) == 0 && active(decs[0]) == 0 }, "load not released after the stream")
}

// gateway-v0.3.1 never seeds the P/D pools' cache-aware trees
// (init_pd_cache_aware_policies has no caller), so a cache_aware pool picks
// a random healthy worker each time: one text sent 40 times reaches both
// workers of each pool, where a tree would keep it on one.
func TestSGPDCacheAwarePicksAtRandom(t *testing.T) {
	r, pre, dec := startSGPD(t, 2, 2)
	for i := 0; i < 40; i++ {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "the same text", false), nil); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, b)
		}
	}
	for pool, es := range map[string][]*routertest.Engine{"prefill": pre, "decode": dec} {
		// Fewer than 5 of 40 on a fair coin: chance under 1e-6.
		if a, b := es[0].Generations(), es[1].Generations(); a < 5 || b < 5 {
			t.Errorf("%s split %d/%d: one text stays on one worker, as if the pool had a tree", pool, a, b)
		}
	}
}

// The circuit breaker publishes its consecutive counts after every
// outcome, and the HTTP layer the requests it is handling
// (publish_gauge_metrics; HttpMetricsMiddleware).
func TestSGConsecutiveCountsAndActiveConnections(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods, "--policy", "round_robin")
	for i := 0; i < 3; i++ {
		routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	}
	es[0].FailNext(1, http.StatusInternalServerError)
	routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	mfs := r.Metrics(t)
	w := map[string]string{"worker": es[0].URL()}
	// The 500 is retried on the same (only) worker, which answers: 3
	// successes, 1 failure, then 1 success.
	if f, _ := routertest.Value(mfs, "smg_worker_cb_consecutive_failures", w); f != 0 {
		t.Errorf("consecutive failures %v", f)
	}
	if s, _ := routertest.Value(mfs, "smg_worker_cb_consecutive_successes", w); s != 1 {
		t.Errorf("consecutive successes %v", s)
	}
	if v, ok := routertest.Value(mfs, "smg_http_connections_active", nil); !ok || v != 0 {
		t.Errorf("http_connections_active %v (%v) after the requests", v, ok)
	}
}

// Chat takes the gateway's ValidatedJson extractor: a rejection or a failed
// validation is a 400 JSON error; completions take axum's Json, whose
// rejections are plain text (as the wheel answers).
func TestSGValidatedJSONErrors(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	for _, c := range []struct{ route, body, want string }{
		{"/v1/chat/completions", `{"model":"m","messages":[]}`,
			`{"error":{"message":"messages: Validation error: messages cannot be empty [{\"value\": Array []}]","type":"invalid_request_error","code":400}}`},
		{"/v1/chat/completions", `{not json`,
			`{"error":{"message":"JSON syntax error: Failed to parse the request body as JSON: key must be a string at line 1 column 2","type":"invalid_request_error","code":"json_parse_error"}}`},
		{"/v1/chat/completions", "{}\n x",
			`{"error":{"message":"Invalid JSON data: Failed to deserialize the JSON body into the target type: missing field ` + "`messages`" + ` at line 1 column 2","type":"invalid_request_error","code":"json_parse_error"}}`},
		{"/v1/completions", `{not json`, "Failed to parse the request body as JSON: key must be a string at line 1 column 2"},
	} {
		st, _, b := routertest.Post(t, r.Base()+c.route, c.body, nil)
		if st != http.StatusBadRequest || string(b) != c.want {
			t.Errorf("%s %s: %d %s\nwant 400 %s", c.route, c.body, st, b, c.want)
		}
	}
	if es[0].Generations() != 0 {
		t.Errorf("a refused request reached the engine")
	}
}

func TestGracefulShutdownReturnsZero(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	if code := r.Stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestSGVersionFlag(t *testing.T) {
	r := routertest.Start(t, Main, []string{"--version"}, nil, nil)
	if code := r.Wait(t, 5*time.Second); code != 0 || r.Stdout.String() != "sgl-model-gateway 0.3.1\n" {
		t.Fatalf("%d %q", code, r.Stdout.String())
	}
}

func TestSGModelFromGetServerInfoFallback(t *testing.T) {
	pods := routertest.NewPods()
	e := routertest.StartEngine(t, "w0", "", 0, "org/served-name")
	e.OldServerInfo.Store(true)
	pods.Put(routertest.EnginePod(ns, "md-server-0", e, selector))
	r := startSG(t, []*routertest.Engine{e}, pods)
	if got := registered(t, r).Workers[0].ModelID; got != "org/served-name" {
		t.Fatalf("model %q", got)
	}
	if e.Count("/get_server_info") != 1 || !strings.Contains(logs(r), "falling back to '/get_server_info'") {
		t.Fatalf("no fallback: %d", e.Count("/get_server_info"))
	}
	if st, _, _ := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("org/served-name", "hi", false), nil); st != 200 {
		t.Fatalf("served name not routable: %d", st)
	}
}

func TestSGPowerOfTwoPollsGetLoad(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startSG(t, es, pods, "--policy=power_of_two", "--worker-startup-check-interval=1")
	routertest.Eventually(t, 5*time.Second, func() bool { return es[0].Count("/get_load") >= 1 && es[1].Count("/get_load") >= 1 }, "loads never polled")
	if !strings.Contains(logs(r), "Starting load monitoring with interval: 1s") {
		t.Fatalf("no load monitor line")
	}
	if st, _, b := routertest.Get(t, r.Base()+"/get_loads"); st != 200 || !strings.Contains(string(b), `{"worker":"`+es[0].URL()+`","load":`) {
		t.Fatalf("get_loads %d %s", st, b)
	}
}
