package vllmrouter

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
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

// startVR runs the router over the engines and waits until all are in
// selection.
func startVR(t *testing.T, es []*routertest.Engine, pods *routertest.Pods, extra ...string) *routertest.Router {
	t.Helper()
	return routertest.StartOverFleet(t, Main, es, pods, map[string]string{"SIM_ROUTER_SEED": "7"}, func(r *routertest.Router) int {
		var l struct{ URLs []string }
		_, _, b := routertest.Get(t, r.Base()+"/list_workers")
		_ = json.Unmarshal(b, &l)
		return len(l.URLs)
	}, extra...)
}

func TestVRBannerDefaultCacheAware(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startVR(t, es, pods)
	out := logs(r)
	want := fmt.Sprintf("Starting router on 0.0.0.0:%d | mode: Regular { worker_urls: [] } | policy: CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 } | kv_connector: Nixl | max_payload: 512MB", r.Port)
	if !strings.Contains(out, want) {
		t.Fatalf("banner missing %q in:\n%s", want, out)
	}
	// tracing full format with ANSI around level and target, UTC time.
	raw := r.Stdout.String()
	re := regexp.MustCompile(`\x1b\[2m\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\x1b\[0m \x1b\[32m INFO\x1b\[0m \x1b\[2mvllm_router_rs::server\x1b\[0m\x1b\[2m:\x1b\[0m \x1b\[2msrc/server\.rs\x1b\[0m\x1b\[2m:\x1b\[0m\x1b\[2m\d+:\x1b\[0m Starting router on `)
	if !re.MatchString(raw) {
		t.Fatalf("banner line not in tracing full format with ANSI:\n%q", raw)
	}
	for _, line := range []string{
		"DEBUG: Main function started",
		"VLLM Router starting...",
		fmt.Sprintf("Host: 0.0.0.0:%d", r.Port),
		"Mode: Regular (vllm)",
		"Policy: cache_aware",
		"Single router mode (enable_igw=false)",
		"Service discovery started",
		// Discovery runs concurrently, so the list may already hold the Pod.
		"Router ready | workers: [",
		fmt.Sprintf("Starting server on 0.0.0.0:%d", r.Port),
		fmt.Sprintf("Adding pod: md-server-0 | type: Some(Regular) | url: %s", es[0].URL()),
		"Initializing workers for cache-aware policy: " + es[0].URL(),
		"Creating tree for model key: 'default' with 1 workers",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("missing %q", line)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", out)
	}
}

func TestVRBannerRoundRobinMooncakeAndFloats(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startVR(t, es, pods, "--policy", "round_robin", "--kv-connector=mooncake")
	out := logs(r)
	if !strings.Contains(out, "| policy: RoundRobin | kv_connector: Mooncake | max_payload: 512MB") || !strings.Contains(out, "\nPolicy: round_robin\n") {
		t.Fatalf("stdout:\n%s", out)
	}
	r2 := startVR(t, es, pods, "--cache-threshold", "1", "--balance-rel-threshold=2", "--max-payload-size=1048576")
	if want := "policy: CacheAware { cache_threshold: 1.0, balance_abs_threshold: 64, balance_rel_threshold: 2.0,"; !strings.Contains(logs(r2), want) || !strings.Contains(logs(r2), "max_payload: 1MB") {
		t.Fatalf("want %q in\n%s", want, logs(r2))
	}
}

func TestBadPolicyExits2WithClapTextAndTip(t *testing.T) {
	r := routertest.Start(t, Main, routertest.OperatorArgs(8000, "--policy", "roundrobin"), nil, routertest.NewPods())
	if code := r.Wait(t, 5*time.Second); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	want := "error: invalid value 'roundrobin' for '--policy <POLICY>'\n" +
		"  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n\n" +
		"  tip: a similar value exists: 'round_robin'\n\n" +
		"For more information, try '--help'.\n"
	if r.Stderr.String() != want {
		t.Fatalf("stderr %q", r.Stderr.String())
	}
	// Only main's DEBUG println lines come before clap's check.
	if out := r.Stdout.String(); !strings.HasPrefix(out, "DEBUG: Main function started\n") || strings.Contains(out, "VLLM Router starting") {
		t.Fatalf("stdout %q", out)
	}
}

func TestPolicyValidOnlyOnOtherRouterRefused(t *testing.T) {
	for _, p := range []string{"prefix_hash", "manual"} {
		r := routertest.Start(t, Main, routertest.OperatorArgs(8000, "--policy="+p), nil, routertest.NewPods())
		if code := r.Wait(t, 5*time.Second); code != 2 || !strings.HasPrefix(r.Stderr.String(), "error: invalid value '"+p+"' for '--policy <POLICY>'\n") {
			t.Fatalf("%s: exit %d stderr %q", p, code, r.Stderr.String())
		}
	}
}

// --prefill-policy and --decode-policy take --policy's values through
// clap's possible-values check, named by their own value names; a value
// far from every candidate gets no tip (docs/routers.md#clap-errors).
func TestVRBadPoolPolicyExits2WithClapText(t *testing.T) {
	for _, c := range []struct{ flag, name, value, tip string }{
		{"--prefill-policy", "PREFILL_POLICY", "prefix_hash", ""},
		{"--decode-policy", "DECODE_POLICY", "roundrobin", "  tip: a similar value exists: 'round_robin'\n\n"},
	} {
		r := routertest.Start(t, Main, routertest.OperatorArgs(8000, c.flag, c.value), nil, routertest.NewPods())
		if code := r.Wait(t, 5*time.Second); code != 2 {
			t.Fatalf("%s %s: exit %d, want 2", c.flag, c.value, code)
		}
		want := "error: invalid value '" + c.value + "' for '" + c.flag + " <" + c.name + ">'\n" +
			"  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n\n" +
			c.tip + "For more information, try '--help'.\n"
		if r.Stderr.String() != want {
			t.Fatalf("%s %s: stderr %q\nwant %q", c.flag, c.value, r.Stderr.String(), want)
		}
	}
}

func TestVRTwiceGivenScalarExits2(t *testing.T) {
	r := routertest.Start(t, Main, routertest.OperatorArgs(8000, "--request-timeout-secs=5", "--request-timeout-secs=6"), nil, routertest.NewPods())
	if code := r.Wait(t, 5*time.Second); code != 2 {
		t.Fatalf("exit %d", code)
	}
	want := "error: the argument '--request-timeout-secs <REQUEST_TIMEOUT_SECS>' cannot be used multiple times\n\nUsage: vllm-router [OPTIONS]\n\nFor more information, try '--help'.\n"
	if r.Stderr.String() != want {
		t.Fatalf("stderr %q", r.Stderr.String())
	}
}

func TestVRChatRoutesOnEmptyTextSoSerialGoesToOneWorker(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods)
	for i := 0; i < 20; i++ {
		// Different prompts: the routing text is still "" for all.
		st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", fmt.Sprintf("prompt %d %s", i, strings.Repeat("x", i)), i%2 == 0), nil)
		if st != 200 {
			t.Fatalf("status %d %s", st, b)
		}
	}
	a, b := es[0].Generations(), es[1].Generations()
	if !(a == 20 && b == 0 || a == 0 && b == 20) {
		t.Fatalf("split %d/%d, want 20/0 or 0/20", a, b)
	}
}

func TestVRCompletionsPrefixAffinity(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods)
	base := strings.Repeat("shared prefix ", 20)
	for i := 0; i < 10; i++ {
		st, _, _ := routertest.Post(t, r.Base()+"/v1/completions", fmt.Sprintf(`{"model":"m","prompt":%q}`, base+strconv.Itoa(i)), nil)
		if st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	if a, b := es[0].Generations(), es[1].Generations(); a+b != 10 || (a != 10 && b != 10) {
		t.Fatalf("split %d/%d", a, b)
	}
}

func TestRoundRobin120Gives60And60WithDecisionMetrics(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods, "--policy", "round_robin")
	for i := 0; i < 120; i++ {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil); st != 200 {
			t.Fatalf("status %d %s", st, b)
		}
	}
	if a, b := es[0].Generations(), es[1].Generations(); a != 60 || b != 60 {
		t.Fatalf("split %d/%d", a, b)
	}
	mfs := r.Metrics(t)
	for _, e := range es {
		if v, _ := routertest.Value(mfs, "vllm_router_policy_decisions_total", map[string]string{"policy": "round_robin", "worker": e.URL()}); v != 60 {
			t.Errorf("decisions for %s = %v", e.URL(), v)
		}
		if v, _ := routertest.Value(mfs, "vllm_router_processed_requests_total", map[string]string{"worker": e.URL()}); v != 60 {
			t.Errorf("processed for %s = %v", e.URL(), v)
		}
	}
	if v, _ := routertest.Value(mfs, "vllm_router_requests_total", map[string]string{"route": "/v1/chat/completions"}); v != 120 {
		t.Errorf("requests_total %v", v)
	}
	if _, ok := mfs["vllm_router_running_requests"]; ok {
		t.Errorf("running_requests exists under round_robin")
	}
	// start_prometheus describes the metrics before it installs the
	// recorder: no family has a HELP line (as the wheel's /metrics shows).
	if h := mfs["vllm_router_policy_decisions_total"].Help; h != nil {
		t.Errorf("HELP %q; vllm-router's exporter knows no description", *h)
	}
}

func TestVRRunningRequestsOnlyUnderCacheAware(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods)
	release := es[0].Hold()
	release2 := es[1].Hold()
	// Registered after startVR, so it runs before the router's Stop: a
	// failure below must not leave held requests that block the shutdown.
	t.Cleanup(func() { release(); release2() })
	inFlight := func() string { return fmt.Sprintf("%d/%d", es[0].InFlight(), es[1].InFlight()) }
	statuses := make(chan error, 2)
	chat := func() {
		st, _, b := post(r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false))
		if st != http.StatusOK {
			statuses <- fmt.Errorf("status %d body %s", st, b)
			return
		}
		statuses <- nil
	}
	// The router selects a worker and only then counts its load
	// (docs/routers.md#candidates-order-and-load), so two chats that reach the
	// policy at the same instant both see 0/0 and go to the first worker. The
	// second is sent once the first is counted, i.e. held at its engine: then
	// cache_aware must pick the other worker (least in flight), and
	// running_requests shows 1 on each while both are held.
	go chat()
	routertest.Eventually(t, 10*time.Second, func() bool { return es[0].InFlight()+es[1].InFlight() == 1 }, "first chat not held: %v", stringer(inFlight))
	go chat()
	routertest.Eventually(t, 10*time.Second, func() bool { return es[0].InFlight() == 1 && es[1].InFlight() == 1 }, "not spread: %v", stringer(inFlight))
	mfs := r.Metrics(t)
	for _, e := range es {
		if v, ok := routertest.Value(mfs, "vllm_router_running_requests", map[string]string{"worker": e.URL()}); !ok || v != 1 {
			t.Errorf("running for %s = %v (%v)", e.URL(), v, ok)
		}
	}
	release()
	release2()
	for i := 0; i < 2; i++ {
		if err := <-statuses; err != nil {
			t.Errorf("chat: %v", err)
		}
	}
	mfs = r.Metrics(t)
	if v, _ := routertest.Value(mfs, "vllm_router_running_requests", nil); v != 0 {
		t.Errorf("running after completion %v", v)
	}
}

// stringer formats what f returns when printed, so a failure message shows
// the state at the failure, not at the call.
type stringer func() string

func (f stringer) String() string { return f() }

// post is routertest.Post for a goroutine other than the test's: errors
// come back as a status of 0 instead of t.Fatal.
func post(url, body string) (int, http.Header, []byte) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestRetriesRerunPolicyAndRecordMetrics(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods, "--policy=round_robin", "--retry-initial-backoff-ms=1", "--retry-max-backoff-ms=2")
	// Every answer fails with 503: 5 attempts, alternating workers.
	es[0].FailNext(100, 503)
	es[1].FailNext(100, 503)
	st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	if st != 503 || !strings.Contains(string(b), "injected failure") {
		t.Fatalf("status %d body %s", st, b)
	}
	if a, b := es[0].Generations(), es[1].Generations(); a+b != 5 || a < 2 || b < 2 {
		t.Fatalf("attempts %d/%d, want 5 alternating", a, b)
	}
	mfs := r.Metrics(t)
	if v, _ := routertest.Value(mfs, "vllm_router_retries_total", map[string]string{"route": "/v1/chat/completions"}); v != 4 {
		t.Errorf("retries_total %v", v)
	}
	if v, _ := routertest.Value(mfs, "vllm_router_retries_exhausted_total", nil); v != 1 {
		t.Errorf("exhausted %v", v)
	}
	if v, _ := routertest.Value(mfs, "vllm_router_policy_decisions_total", nil); v != 5 {
		t.Errorf("decisions %v", v)
	}
	if _, ok := mfs["vllm_router_requests_total"]; ok {
		t.Errorf("requests_total recorded for a failure")
	}
	// --disable-retries: one attempt only.
	r2 := startVR(t, es, pods, "--policy=round_robin", "--disable-retries")
	before := es[0].Generations() + es[1].Generations()
	if st, _, _ := routertest.Post(t, r2.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil); st != 503 {
		t.Fatalf("status %d", st)
	}
	if n := es[0].Generations() + es[1].Generations() - before; n != 1 {
		t.Fatalf("attempts with --disable-retries: %d", n)
	}
}

func TestStreamingRelayedUnchanged(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startVR(t, es, pods)
	st, h, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", true), nil)
	if st != 200 || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content-type %q", st, h.Get("Content-Type"))
	}
	if want := strings.Join(routertest.StreamChunks("w0"), ""); string(b) != want {
		t.Fatalf("body %q want %q", b, want)
	}
	if h.Get("X-Upstream-Only") != "1" {
		t.Fatalf("upstream headers not copied: %v", h)
	}
}

var idRe = regexp.MustCompile(`^chatcmpl-[A-Za-z0-9]{24}$`)

func TestRequestIDHeaderAlwaysSet(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startVR(t, es, pods)
	_, h, _ := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	if !idRe.MatchString(h.Get("x-request-id")) {
		t.Fatalf("generated id %q", h.Get("x-request-id"))
	}
	// Not added upstream.
	if es[0].LastHeaders().Get("x-request-id") != "" {
		t.Fatalf("generated id forwarded upstream")
	}
	_, h, _ = routertest.Post(t, r.Base()+"/v1/completions", `{"prompt":"x"}`, map[string]string{"X-Correlation-Id": "corr-1"})
	if h.Get("x-request-id") != "corr-1" {
		t.Fatalf("id %q", h.Get("x-request-id"))
	}
	_, h, _ = routertest.Get(t, r.Base()+"/liveness")
	if !regexp.MustCompile(`^req-[A-Za-z0-9]{24}$`).MatchString(h.Get("x-request-id")) {
		t.Fatalf("liveness id %q", h.Get("x-request-id"))
	}
	// Error answers carry it too.
	resp, err := http.Post(r.Base()+"/v1/chat/completions", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 || resp.Header.Get("x-request-id") == "" {
		t.Fatalf("415 answer: %d %q", resp.StatusCode, resp.Header.Get("x-request-id"))
	}
}

func TestVRForwardsAllHeadersButContentAndTrace(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startVR(t, es, pods)
	routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false),
		map[string]string{"X-Custom": "c", "Authorization": "Bearer k", "traceparent": "00-abc-def-01"})
	h := es[0].LastHeaders()
	if h.Get("X-Custom") != "c" || h.Get("Authorization") != "Bearer k" || h.Get("traceparent") != "" {
		t.Fatalf("forwarded headers %v", h)
	}
}

func TestVRNoWorkers503PlainText(t *testing.T) {
	r := routertest.Start(t, Main, routertest.OperatorArgs(8000, "--retry-max-retries=2", "--retry-initial-backoff-ms=1"), nil, routertest.NewPods())
	r.WaitReady(t, "/liveness", 5*time.Second)
	st, h, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	if st != 503 || string(b) != "No available workers (all circuits open or unhealthy)" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %q %q", st, b, h.Get("Content-Type"))
	}
	if v, _ := routertest.Value(r.Metrics(t), "vllm_router_request_errors_total", map[string]string{"error_type": "no_available_workers"}); v != 2 {
		t.Fatalf("errors %v", v)
	}
	st, _, b = routertest.Get(t, r.Base()+"/readiness")
	if st != 503 || string(b) != `{"reason":"no healthy workers available","status":"not_ready","total_workers":0}` {
		t.Fatalf("readiness %d %s", st, b)
	}
	if st, _, b := routertest.Get(t, r.Base()+"/health"); st != 200 || string(b) != "All servers healthy" {
		t.Fatalf("health %d %s", st, b)
	}
}

// GET /v1/models is proxy_get_request to the first worker in registry
// order, every time, its answer relayed as it came (status, JSON content
// type, body): vllm-router 0.1.15 from PyPI does the same in front of two
// fake engines on loopback (docs/routers.md#get-v1models-through-each-router).
func TestVRModelsIsTheFirstWorkersAnswerAsIs(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods)
	var l struct{ URLs []string }
	_, _, b := routertest.Get(t, r.Base()+"/list_workers")
	if err := json.Unmarshal(b, &l); err != nil || len(l.URLs) != 2 {
		t.Fatalf("workers %s", b)
	}
	var first *routertest.Engine
	for _, e := range es {
		if l.URLs[0] == fmt.Sprintf("http://%s:%d", e.IP, e.Port) {
			first = e
		}
	}
	if first == nil {
		t.Fatalf("the first worker %s is neither engine", l.URLs[0])
	}
	_, _, own := routertest.Get(t, l.URLs[0]+"/v1/models")
	for range 6 {
		st, h, b := routertest.Get(t, r.Base()+"/v1/models")
		if st != 200 || h.Get("Content-Type") != "application/json" || string(b) != string(own) {
			t.Fatalf("models %d %q %s; the first worker answers %s", st, h.Get("Content-Type"), b, own)
		}
	}
	if first.Count("/v1/models") != 7 || es[0].Count("/v1/models")+es[1].Count("/v1/models") != 7 {
		t.Fatalf("models asked of %s %d times, of both %d: want every GET on the first worker",
			first.Name, first.Count("/v1/models"), es[0].Count("/v1/models")+es[1].Count("/v1/models"))
	}
}

func TestVRPublicRoutesAndFallbackProxy(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods)
	// json! without preserve_order: keys sorted, as the wheel answers.
	st, _, b := routertest.Get(t, r.Base()+"/readiness")
	if st != 200 || string(b) != `{"healthy_workers":2,"status":"ready","total_workers":2}` {
		t.Fatalf("readiness %d %s", st, b)
	}
	if st, _, b := routertest.Get(t, r.Base()+"/get_loads"); st != 200 || !strings.HasPrefix(string(b), `{"workers":[{"load":0,"worker":"http://`) {
		t.Fatalf("get_loads %d %s", st, b)
	}
	st, _, b = routertest.Get(t, r.Base()+"/tokenize/extra?x=1")
	if st != 200 || !strings.Contains(string(b), `"path":"/tokenize/extra"`) || !strings.Contains(string(b), `"query":"x=1"`) {
		t.Fatalf("fallback %d %s", st, b)
	}
	st, _, b = routertest.Get(t, r.Base()+"/liveness")
	if st != 200 || string(b) != "OK" {
		t.Fatalf("liveness %d %s", st, b)
	}
}

func TestDiscoveryAddsWorkerOnlyAfterHealth(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, nil)
	es[0].SetHealthy(false)
	pods.Put(routertest.EnginePod(ns, "md-server-0", es[0], selector))
	r := routertest.Start(t, Main, routertest.OperatorArgs(es[0].Port, "--worker-startup-check-interval=1"), nil, pods)
	r.WaitReady(t, "/liveness", 5*time.Second)
	routertest.Eventually(t, 5*time.Second, func() bool { return es[0].Count("/health") >= 1 }, "no health probe")
	var view struct {
		Workers []struct {
			URL       string
			Selection struct {
				Registered  bool `json:"registered"`
				InSelection bool `json:"in_selection"`
			}
		}
	}
	_, _, b := routertest.Get(t, r.Base()+"/observer/endpoints")
	_ = json.Unmarshal(b, &view)
	if len(view.Workers) != 1 || view.Workers[0].Selection.Registered {
		t.Fatalf("pending worker view %s", b)
	}
	if _, _, b := routertest.Get(t, r.Base()+"/list_workers"); string(b) != `{"urls":[]}` {
		t.Fatalf("registered before health: %s", b)
	}
	es[0].SetHealthy(true)
	routertest.Eventually(t, 5*time.Second, func() bool {
		_, _, b := routertest.Get(t, r.Base()+"/list_workers")
		return strings.Contains(string(b), es[0].URL())
	}, "never admitted after health")
	// Unready Pod: removed.
	pods.Update(ns, "md-server-0", func(p *proc.Pod) { p.Ready = false })
	routertest.Eventually(t, 5*time.Second, func() bool {
		_, _, b := routertest.Get(t, r.Base()+"/list_workers")
		return string(b) == `{"urls":[]}`
	}, "unready pod not removed")
	if !strings.Contains(logs(r), "Removing pod: md-server-0 | type: Some(Regular) | url: "+es[0].URL()) {
		t.Fatalf("no removal line:\n%s", logs(r))
	}
}

func TestDiscoverySelectorNamespaceAndDeletion(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 3, nil)
	pods.Put(routertest.EnginePod(ns, "a", es[0], map[string]string{"app.kubernetes.io/instance": "md"}))
	pods.Put(routertest.EnginePod("other", "b", es[1], map[string]string{"app.kubernetes.io/instance": "md"}))
	pods.Put(routertest.EnginePod(ns, "c", es[2], map[string]string{"app.kubernetes.io/instance": "other"}))
	r := startVR(t, es[:1], pods)
	pods.Update(ns, "a", func(p *proc.Pod) { p.Deleting = true })
	routertest.Eventually(t, 5*time.Second, func() bool {
		_, _, b := routertest.Get(t, r.Base()+"/list_workers")
		return string(b) == `{"urls":[]}`
	}, "deleting pod kept")
}

func TestObserverEndpointsShape(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods)
	_, h, b := routertest.Get(t, r.Base()+"/observer/endpoints")
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("%v %s", err, b)
	}
	router, _ := v["router"].(map[string]any)
	if _, ok := router["boot_generation"].(float64); !ok {
		t.Fatalf("boot_generation: %s", b)
	}
	if _, ok := router["now_ms"].(float64); !ok {
		t.Fatalf("now_ms: %s", b)
	}
	if _, ok := v["registry_revision"].(float64); !ok {
		t.Fatalf("registry_revision: %s", b)
	}
	ws, _ := v["workers"].([]any)
	if len(ws) != 2 {
		t.Fatalf("workers: %s", b)
	}
	for _, w := range ws {
		m := w.(map[string]any)
		sel := m["selection"].(map[string]any)
		if m["role"] != "regular" || m["port"].(float64) != float64(es[0].Port) || !strings.HasPrefix(m["pod_hint"].(string), "md-server-") ||
			m["worker_id"] == "" || sel["registered"] != true || sel["healthy"] != true || sel["circuit_open"] != false || sel["in_selection"] != true {
			t.Fatalf("worker %v", m)
		}
	}
}

func TestVRCandidateOrderRandomPerProcessStableWithinOne(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 4, pods)
	orders := map[string]bool{}
	for seed := 1; seed <= 6; seed++ {
		r := routertest.Start(t, Main, routertest.OperatorArgs(es[0].Port), map[string]string{"SIM_ROUTER_SEED": strconv.Itoa(seed)}, pods)
		r.WaitReady(t, "/liveness", 5*time.Second)
		var l struct{ URLs []string }
		routertest.Eventually(t, 5*time.Second, func() bool {
			_, _, b := routertest.Get(t, r.Base()+"/list_workers")
			_ = json.Unmarshal(b, &l)
			return len(l.URLs) == 4
		}, "not registered")
		_, _, b1 := routertest.Get(t, r.Base()+"/list_workers")
		_, _, b2 := routertest.Get(t, r.Base()+"/list_workers")
		if string(b1) != string(b2) {
			t.Fatalf("order changed without membership change")
		}
		orders[string(b1)] = true
		r.Stop(t)
	}
	if len(orders) < 2 {
		t.Fatalf("candidate order identical across 6 seeds: %v", orders)
	}
}

func TestGracefulShutdownReturnsZero(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startVR(t, es, pods)
	if code := r.Stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(logs(r), "Received terminate signal, starting graceful shutdown") {
		t.Fatalf("no shutdown line")
	}
}

func TestVRMetricsExporterAnswersAnyPathAndHealth(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startVR(t, es, pods)
	base := strings.TrimSuffix(r.MetricsURL(), "/metrics")
	if st, _, b := routertest.Get(t, base+"/health"); st != 200 || string(b) != "OK" {
		t.Fatalf("health %d %s", st, b)
	}
	st, _, b := routertest.Get(t, base+"/anything")
	if st != 200 || !strings.Contains(string(b), "# TYPE vllm_router_active_workers gauge\nvllm_router_active_workers 1\n") || strings.Contains(string(b), "# HELP") {
		t.Fatalf("exposition %d %s", st, b)
	}
}

func TestVRConfigErrorExits1(t *testing.T) {
	r := routertest.Start(t, Main, []string{"--host=0.0.0.0", "--port={PORT}"}, nil, nil)
	if code := r.Wait(t, 5*time.Second); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if want := "Error: ValidationFailed { reason: \"Regular mode requires --worker-urls when not using service discovery\" }\n"; r.Stderr.String() != want {
		t.Fatalf("stderr %q", r.Stderr.String())
	}
	r = routertest.Start(t, Main, routertest.OperatorArgs(8000, "--cache-threshold=1.5"), nil, routertest.NewPods())
	if code := r.Wait(t, 5*time.Second); code != 1 || !strings.Contains(r.Stderr.String(), `InvalidValue { field: "cache_threshold", value: "1.5", reason: "Must be between 0.0 and 1.0" }`) {
		t.Fatalf("exit %d stderr %q", code, r.Stderr.String())
	}
	// power_of_two over one static worker: what the clap binary (and the
	// wheel) refuse; under service discovery the count is not checked.
	r = routertest.Start(t, Main, []string{"--host=0.0.0.0", "--port={PORT}", "--worker-urls", "http://127.0.0.1:1", "--policy", "power_of_two"}, nil, nil)
	if code := r.Wait(t, 5*time.Second); code != 1 ||
		r.Stderr.String() != "Error: IncompatibleConfig { reason: \"Power-of-two policy requires at least 2 workers\" }\n" ||
		!strings.HasSuffix(r.Stdout.String(), "DEBUG: Validating configuration\n") {
		t.Fatalf("exit %d stderr %q stdout tail %q", code, r.Stderr.String(), r.Stdout.String())
	}
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	startVR(t, es, pods, "--policy", "power_of_two")
}

// startVRPD runs the router over nPre prefill and nDec decode engines as
// the operator renders a pair, and waits until all are registered.
func startVRPD(t *testing.T, nPre, nDec int, extra ...string) (*routertest.Router, []*routertest.Engine, []*routertest.Engine) {
	t.Helper()
	pods := routertest.NewPods()
	pre, dec := routertest.PDFleet(t, nPre, nDec, pods, "vllm.ai/bootstrap-port")
	args := routertest.PDArgs(pre[0].Port, "--vllm-pd-disaggregation", append([]string{"--kv-connector=mooncake"}, extra...)...)
	r := routertest.Start(t, Main, args, map[string]string{"SIM_ROUTER_SEED": "7"}, pods)
	r.WaitReady(t, "/liveness", 5*time.Second)
	routertest.Eventually(t, 5*time.Second, func() bool {
		_, _, b := routertest.Get(t, r.Base()+"/list_workers")
		return strings.Count(string(b), "http://") == nPre+nDec
	}, "pd workers not registered")
	return r, pre, dec
}

func generations(es []*routertest.Engine) []int {
	out := make([]int, len(es))
	for i, e := range es {
		out[i] = e.Generations()
	}
	return out
}

func TestVRPDTwoStageWithMooncakeParams(t *testing.T) {
	r, pres, decs := startVRPD(t, 1, 1)
	pre, dec := pres[0], decs[0]
	st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	if st != 200 || !strings.Contains(string(b), `"worker":"d0"`) {
		t.Fatalf("%d %s", st, b)
	}
	var p, d map[string]any
	_ = json.Unmarshal(pre.LastBody(), &p)
	_ = json.Unmarshal(dec.LastBody(), &d)
	pk, _ := p["kv_transfer_params"].(map[string]any)
	dk, _ := d["kv_transfer_params"].(map[string]any)
	if p["max_tokens"] != float64(1) || pk["do_remote_decode"] != true || !strings.HasPrefix(fmt.Sprint(pk["transfer_id"]), "xfer-") {
		t.Fatalf("prefill body %v", p)
	}
	if dk["do_remote_prefill"] != true || dk["transfer_id"] != pk["transfer_id"] || dk["remote_bootstrap_addr"] != "http://"+pre.IP+":8998" {
		t.Fatalf("decode body %v", d)
	}
	if !strings.HasPrefix(pre.LastHeaders().Get("X-Request-Id"), "___prefill_addr_"+pre.IP) {
		t.Fatalf("request id %q", pre.LastHeaders().Get("X-Request-Id"))
	}
	mfs := r.Metrics(t)
	for name, url := range map[string]string{"vllm_router_pd_prefill_requests_total": pre.URL(), "vllm_router_pd_decode_requests_total": dec.URL()} {
		if v, _ := routertest.Value(mfs, name, map[string]string{"worker": url}); v != 1 {
			t.Errorf("%s = %v", name, v)
		}
	}
	if v, _ := routertest.Value(mfs, "vllm_router_pd_requests_total", map[string]string{"route": "/v1/chat/completions"}); v != 1 {
		t.Errorf("pd_requests %v", v)
	}
	// Load is counted for the legs, but the P/D router never sets the
	// running gauge (docs/routers.md#corrections).
	if _, ok := routertest.Value(mfs, "vllm_router_running_requests", nil); ok {
		t.Errorf("vllm_router_running_requests exported in P/D mode")
	}
	out := logs(r)
	if !strings.Contains(out, "mode: VllmPrefillDecode { prefill_urls: [], decode_urls: [], prefill_policy: None, decode_policy: None, discovery_address: None } | policy: CacheAware") ||
		!strings.Contains(out, "Mode: vLLM PD Disaggregated") || !strings.Contains(out, "Adding pod: md-prefill-0 | type: Some(Prefill)") {
		t.Fatalf("stdout:\n%s", out)
	}
	if !strings.Contains(r.Stderr.String(), "INFO: Using K8s service discovery mode for vLLM PD disaggregation.") {
		t.Fatalf("stderr %q", r.Stderr.String())
	}
}

// Each pool has a round-robin instance of its own: 8 serial requests over
// 2 prefill and 2 decode workers are 4/4 and 4/4. One shared counter would
// send every prefill to one worker and every decode to the other.
func TestVRPDOnePolicyInstancePerPool(t *testing.T) {
	r, pre, dec := startVRPD(t, 2, 2, "--policy", "round_robin")
	for i := 0; i < 8; i++ {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", fmt.Sprint("q", i), false), nil); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, b)
		}
	}
	if p, d := generations(pre), generations(dec); fmt.Sprint(p, d) != "[4 4] [4 4]" {
		t.Fatalf("prefill %v decode %v, want [4 4] [4 4]", p, d)
	}
	mfs := r.Metrics(t)
	for _, e := range append(append([]*routertest.Engine{}, pre...), dec...) {
		if v, _ := routertest.Value(mfs, "vllm_router_policy_decisions_total", map[string]string{"policy": "round_robin", "worker": e.URL()}); v != 4 {
			t.Errorf("decisions of %s = %v, want 4", e.Name, v)
		}
	}
	for _, e := range pre {
		if v, _ := routertest.Value(mfs, "vllm_router_pd_prefill_requests_total", map[string]string{"worker": e.URL()}); v != 4 {
			t.Errorf("pd_prefill of %s = %v", e.Name, v)
		}
	}
	for _, e := range dec {
		if v, _ := routertest.Value(mfs, "vllm_router_pd_decode_requests_total", map[string]string{"worker": e.URL()}); v != 4 {
			t.Errorf("pd_decode of %s = %v", e.Name, v)
		}
	}
}

// --prefill-policy and --decode-policy each pick for their own pool: round
// robin spreads the prefills, cache_aware keeps serial decodes on one worker.
func TestVRPDPoolPolicyFlags(t *testing.T) {
	r, pre, dec := startVRPD(t, 2, 2, "--prefill-policy", "round_robin", "--decode-policy", "cache_aware")
	for i := 0; i < 8; i++ {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", fmt.Sprint("q", i), false), nil); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, b)
		}
	}
	p, d := generations(pre), generations(dec)
	if fmt.Sprint(p) != "[4 4]" || (fmt.Sprint(d) != "[8 0]" && fmt.Sprint(d) != "[0 8]") {
		t.Fatalf("prefill %v decode %v, want [4 4] and 8 on one decoder", p, d)
	}
	if !strings.Contains(logs(r), "prefill_policy: Some(RoundRobin), decode_policy: Some(CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 }), discovery_address: None } | policy: CacheAware") {
		t.Fatalf("banner:\n%s", logs(r))
	}
}

// The P/D path has no retry executor; the prefill status is not checked;
// the counters move once the decode leg has answered, whatever its status.
func TestVRPDRequestPathAndCounters(t *testing.T) {
	r, pres, decs := startVRPD(t, 1, 1)
	pre, dec := pres[0], decs[0]

	pre.FailNext(1, http.StatusNotFound)
	if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "a", false), nil); st != 200 || !strings.Contains(string(b), `"worker":"d0"`) {
		t.Fatalf("a failed prefill status still decodes: %d %s", st, b)
	}
	dec.FailNext(1, http.StatusServiceUnavailable)
	st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "b", false), nil)
	if st != http.StatusServiceUnavailable || !strings.Contains(string(b), "injected failure") {
		t.Fatalf("the decode answer comes back unchanged: %d %s", st, b)
	}
	if p, d := pre.Generations(), dec.Generations(); p != 2 || d != 2 {
		t.Fatalf("legs %d/%d: a 503 must not be retried", p, d)
	}
	mfs := r.Metrics(t)
	for name, want := range map[string]float64{"vllm_router_pd_requests_total": 2, "vllm_router_pd_prefill_requests_total": 2,
		"vllm_router_pd_decode_requests_total": 2, "vllm_router_pd_decode_errors_total": 1, "vllm_router_retries_total": 0} {
		if v, _ := routertest.Value(mfs, name, nil); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}

	dec.Close()
	st, _, b = routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "c", false), nil)
	if st != http.StatusInternalServerError || !strings.Contains(string(b), "Decode request failed to "+dec.IP) {
		t.Fatalf("unreachable decoder: %d %s", st, b)
	}
	mfs = r.Metrics(t)
	for name, want := range map[string]float64{"vllm_router_pd_requests_total": 3, "vllm_router_pd_prefill_requests_total": 3,
		"vllm_router_pd_decode_requests_total": 2, "vllm_router_pd_decode_errors_total": 2} {
		if v, _ := routertest.Value(mfs, name, nil); v != want {
			t.Errorf("after a decode network error %s = %v, want %v", name, v, want)
		}
	}
}

func TestVRPDEmptyPool(t *testing.T) {
	pods := routertest.NewPods()
	pre, _ := routertest.PDFleet(t, 1, 0, pods, "")
	r := routertest.Start(t, Main, routertest.PDArgs(pre[0].Port, "--vllm-pd-disaggregation"), nil, pods)
	r.WaitReady(t, "/liveness", 5*time.Second)
	routertest.Eventually(t, 5*time.Second, func() bool {
		_, _, b := routertest.Get(t, r.Base()+"/list_workers")
		return strings.Count(string(b), "http://") == 1
	}, "prefill worker not registered")
	st, _, b := routertest.Post(t, r.Base()+"/v1/completions", `{"model":"m","prompt":"x"}`, nil)
	if st != http.StatusServiceUnavailable || string(b) != "No workers available: 1 prefill, 0 decode" {
		t.Fatalf("%d %q", st, b)
	}
}

// Worker::record_outcome is the only setter of cb_state: a worker that
// never served has no series, one that did has its state after each
// outcome. The P/D router records no outcome and leaves active_workers
// unset (its only setter is the regular router).
func TestVRCircuitSeriesOnlyAfterOutcomes(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 2, pods)
	r := startVR(t, es, pods) // cache_aware: serial chats all go to one worker
	for i := 0; i < 3; i++ {
		if st, _, b := routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil); st != 200 {
			t.Fatalf("chat %d: %d %s", i, st, b)
		}
	}
	mfs := r.Metrics(t)
	served := 0
	for _, e := range es {
		state, hasState := routertest.Value(mfs, "vllm_router_cb_state", map[string]string{"worker": e.URL()})
		outcomes, _ := routertest.Value(mfs, "vllm_router_cb_outcomes_total", map[string]string{"worker": e.URL(), "outcome": "success"})
		switch {
		case e.Generations() == 3 && hasState && state == 0 && outcomes == 3:
			served++
		case e.Generations() == 0 && !hasState && outcomes == 0:
		default:
			t.Errorf("%s served %d: cb_state %v (%v), outcomes %v", e.Name, e.Generations(), state, hasState, outcomes)
		}
	}
	if served != 1 {
		t.Fatalf("%d workers served the serial chats, want 1", served)
	}
	if v, _ := routertest.Value(mfs, "vllm_router_active_workers", nil); v != 2 {
		t.Errorf("active_workers %v", v)
	}

	pd, _, _ := startVRPD(t, 1, 1)
	if st, _, b := routertest.Post(t, pd.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil); st != 200 {
		t.Fatalf("P/D chat: %d %s", st, b)
	}
	mfs = pd.Metrics(t)
	for _, name := range []string{"vllm_router_cb_state", "vllm_router_cb_outcomes_total", "vllm_router_active_workers"} {
		if _, ok := mfs[name]; ok {
			t.Errorf("%s exported in P/D mode", name)
		}
	}
}

func TestVRConsistentHashSameHeaderSameWorker(t *testing.T) {
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 3, pods)
	r := startVR(t, es, pods, "--policy", "consistent_hash")
	for _, key := range []string{"alice", "bob", "carol"} {
		before := []int{es[0].Generations(), es[1].Generations(), es[2].Generations()}
		for i := 0; i < 5; i++ {
			routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", fmt.Sprint(i), false), map[string]string{"X-Session-Id": key})
		}
		moved := 0
		for i, e := range es {
			if d := e.Generations() - before[i]; d == 5 {
				moved++
			} else if d != 0 {
				t.Fatalf("key %s split across workers", key)
			}
		}
		if moved != 1 {
			t.Fatalf("key %s: %d workers", key, moved)
		}
	}
}
