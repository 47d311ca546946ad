package epp_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/epp"
	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
)

// effectiveSGLangServer is the loader's String() of the operator's SGLang
// server config after default injection (configloader.go:164): plugins in
// config order then the injected defaults, fmt's space-separated slices,
// weights with %.2f, parameters as the compact JSON the YAML became, and
// apimachinery's generated (*metav1.Duration).String printing "nil".
const effectiveSGLangServer = `{Plugins: [{Name: server-pods, Type: label-selector-filter, Parameters: {"matchLabels":{"modeldeployment.gpustack.ai/role-kind":"server"}}} ` +
	`{Name: approx-prefix-cache-producer, Type: approx-prefix-cache-producer} {Name: queue-scorer, Type: queue-scorer} ` +
	`{Name: kv-cache-utilization-scorer, Type: kv-cache-utilization-scorer} {Name: max-score-picker, Type: max-score-picker} ` +
	`{Name: prefix-cache-scorer, Type: prefix-cache-scorer} {Name: metrics-data-source, Type: metrics-data-source, Parameters: {"port":8000}} ` +
	`{Name: core-metrics-extractor, Type: core-metrics-extractor, Parameters: {"engineConfigs":[{"kvUsageSpec":"sglang:token_usage","name":"sglang","queuedRequestsSpec":"sglang:num_queue_reqs","runningRequestsSpec":"sglang:num_running_reqs"}]}} ` +
	`{Name: single-profile-handler, Type: single-profile-handler} {Name: fcfs-ordering-policy, Type: fcfs-ordering-policy} ` +
	`{Name: global-strict-fairness-policy, Type: global-strict-fairness-policy} {Name: static-usage-limit-policy, Type: static-usage-limit-policy} ` +
	`{Name: openai-parser, Type: openai-parser} {Name: anthropic-parser, Type: anthropic-parser} {Name: vllmhttp-parser, Type: vllmhttp-parser} ` +
	`{Name: utilization-detector, Type: utilization-detector}], ` +
	`SchedulingProfiles: [{Name: server, Plugins: [{PluginRef: server-pods} {PluginRef: queue-scorer, Weight: 2.00} {PluginRef: kv-cache-utilization-scorer, Weight: 2.00} {PluginRef: max-score-picker} {PluginRef: prefix-cache-scorer, Weight: 3.00}]}], ` +
	`DataLayer: {Sources: [{PluginRef: metrics-data-source, Extractors: [{PluginRef: core-metrics-extractor}]}], Discovery: <nil>, CrossReplicaSyncerPluginRef: , CrossReplicaSyncInterval: nil}, ` +
	`FlowControl: {MaxBytes: unlimited, MaxRequests: unlimited, SaturationDetector: {PluginRef: utilization-detector}}, ` +
	`RequestHandler: {Parsers: [{PluginRef: openai-parser}, {PluginRef: anthropic-parser}, {PluginRef: vllmhttp-parser}]}}`

func TestStartupLogsEffectiveConfigWithDefaultsAndWeights(t *testing.T) {
	r := startRouter(t, podOpts{config: "sglang-server.yaml", kinds: []string{"server", "server"}})
	info := r.waitStarted()
	if info.Pool != "qwen-router" || info.Namespace != "team-a" || info.Seed != 42 {
		t.Fatalf("start info %+v: pool is the Deployment name from POD_NAME, namespace from NAMESPACE", info)
	}
	lines := logLines(t, r.eppErr.String())
	var msgs []string
	byMsg := map[string]map[string]any{}
	for _, l := range lines {
		msg, _ := l["msg"].(string)
		msgs = append(msgs, msg)
		if _, seen := byMsg[msg]; !seen {
			byMsg[msg] = l
		}
	}
	wantOrder := []string{
		"GIE build", "Flags processed", "init OTel trace exporter", "Loaded raw configuration", "Data layer: ENABLED",
		"Raw config after phase one",
		"Instantiated all plugins and applied system defaults. Effective raw configuration",
		"auto-created default producer", "loaded configuration from file/text successfully",
		"EPP config after phase two", "Setting pprof handlers", "parsed config",
		"Flow Control layer is disabled via the flowControl feature gate, using legacy admission control",
		"Controller manager starting",
	}
	at := 0
	for _, m := range msgs {
		if at < len(wantOrder) && m == wantOrder[at] {
			at++
		}
	}
	if at != len(wantOrder) {
		t.Fatalf("startup lines out of order; missing %q after %v\nall: %q", wantOrder[at], wantOrder[:at], msgs)
	}
	// Plugin factories log between "Raw config after phase one" and the
	// effective config; the EPP instantiates in a map-derived order
	// (util.TopologicalSort), so only their presence is pinned.
	for _, m := range []string{"Registered engine mapping", "Prefix DataProducer initialized",
		"WARNING: configured blockSizeTokens is below the recommended minimum, overriding it."} {
		if byMsg[m] == nil {
			t.Errorf("missing plugin factory line %q", m)
		}
	}
	eff := byMsg["Instantiated all plugins and applied system defaults. Effective raw configuration"]
	if eff["config"] != effectiveSGLangServer {
		t.Errorf("effective config:\n got %v\nwant %s", eff["config"], effectiveSGLangServer)
	}
	if eff["caller"] != "loader/configloader.go:164" || eff["level"] != "info" || eff["logger"] != nil {
		t.Errorf("effective line keys: %v", eff)
	}
	build := byMsg["GIE build"]
	if build["logger"] != "setup" || build["commit-sha"] != epp.CommitSHA || build["build-ref"] != epp.BuildRef {
		t.Errorf("build line: %v", build)
	}
	flags, _ := byMsg["Flags processed"]["flags"].(map[string]any)
	if flags["secure-serving"] != false || flags["grpc-health-port"] != float64(9003) ||
		flags["refresh-metrics-interval"] != float64(50e6) || flags["metrics-staleness-threshold"] != float64(2e9) {
		t.Errorf("flags map (pflag values reflected as JSON): %v", flags)
	}
	if _, ok := flags["total-queued-requests-metric"]; ok {
		t.Errorf("deprecated metric flags must be left out of Flags processed")
	}
	auto := byMsg["auto-created default producer"]
	if auto["producer"] != "token-producer/token-producer" || auto["dataKey"] != "TokenizedPrompt/token-producer" {
		t.Errorf("auto-created producer line: %v", auto)
	}
	parsed, _ := byMsg["parsed config"]["scheduler-config"].(string)
	wantParsed := "{ProfileHandler: single-profile-handler/single-profile-handler, Profiles: map[server:{Filters: [server-pods/label-selector-filter], " +
		"Scorers: [queue-scorer/queue-scorer: 2.000000, kv-cache-utilization-scorer/kv-cache-utilization-scorer: 2.000000, prefix-cache-scorer/prefix-cache-scorer: 3.000000], " +
		"Picker: max-score-picker/max-score-picker}]}"
	if parsed != wantParsed {
		t.Errorf("parsed config:\n got %s\nwant %s", parsed, wantParsed)
	}
	var raw map[string]any
	b, _ := json.Marshal(byMsg["Raw config after phase one"]["config"])
	_ = json.Unmarshal(b, &raw)
	if raw["kind"] != "EndpointPickerConfig" || raw["dataLayer"] != nil {
		t.Errorf("raw config map (before system defaults): %v", raw)
	}
}

func TestRoutesChatThroughEnvoyToAnEngine(t *testing.T) {
	r := startRouter(t, podOpts{config: "sglang-server.yaml", kinds: []string{"server", "server"}})
	r.waitStarted()
	resp, body := r.post("/v1/chat/completions", `{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-gateway-destination-endpoint": "10.9.9.9:1"})
	if resp.StatusCode != 200 || !strings.Contains(body, `"served_by"`) {
		t.Fatalf("status %d body %s; epp:\n%s", resp.StatusCode, body, r.eppErr.String())
	}
	if resp.Header.Get("x-went-into-resp-headers") != "true" {
		t.Errorf("EPP response header mutation missing: %v", resp.Header)
	}
	var served int64
	for _, e := range r.engines {
		served += e.Requests.Load()
		if e.Requests.Load() == 1 {
			h, b := e.Last()
			if got := h.Get("x-gateway-destination-endpoint"); got != e.Addr() {
				t.Errorf("upstream saw destination %q, want the EPP's pick %s (client copy must be stripped)", got, e.Addr())
			}
			if string(b) != `{"messages":[{"content":"hi","role":"user"}],"model":"Qwen/Qwen3-0.6B"}` {
				t.Errorf("EPP re-serialises the body (repackage): %s", b)
			}
		}
	}
	if served != 1 {
		t.Fatalf("engines served %d requests, want 1", served)
	}
}

func TestServesExtProcGRPCOnThePodsAddress(t *testing.T) {
	r := startRouter(t, podOpts{config: "sglang-server.yaml", kinds: []string{"server"}})
	info := r.waitStarted()
	if info.ExtProc != net.JoinHostPort(r.ip, "9002") {
		t.Fatalf("ext_proc listens on %s, want the Pod's address and --grpc-port", info.ExtProc)
	}
	// Envoy's side of the stream, as the envoy container dials it.
	c, err := extproc.NewClient(info.ExtProc, "localhost:9002", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reply, err := s.Request(map[string]string{":method": "POST", ":path": "/v1/chat/completions", ":authority": "qwen",
		"content-type": "application/json", "x-request-id": "grpc-1"},
		[]byte(`{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := r.engines[0].Addr()
	if reply.SetHeaders[epp.DestinationHeader] != want || reply.Destination != want {
		t.Fatalf("the pick travels as header %q and envoy.lb metadata %q, want %s", reply.SetHeaders[epp.DestinationHeader], reply.Destination, want)
	}
	if string(reply.Body) != `{"messages":[{"content":"hi","role":"user"}],"model":"Qwen/Qwen3-0.6B"}` {
		t.Fatalf("body mutation: %s", reply.Body)
	}
	set, err := s.ResponseHeaders(200, map[string]string{"content-type": "application/json"})
	if err != nil || set["x-went-into-resp-headers"] != "true" {
		t.Fatalf("response headers: %v %v", set, err)
	}
	if err := s.SendResponseBody([]byte(`{"usage":{"prompt_tokens":3,`), false); err != nil {
		t.Fatal(err)
	}
	if err := s.SendResponseBody([]byte(`"completion_tokens":1}}`), true); err != nil {
		t.Fatal(err)
	}
	got, eos, err := s.RecvResponseBody()
	if err != nil || !eos || string(got) != `{"usage":{"prompt_tokens":3,"completion_tokens":1}}` {
		t.Fatalf("a non-streaming response comes back whole at its end: %q %v %v", got, eos, err)
	}
}
