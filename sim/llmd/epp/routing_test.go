package epp_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpustack/routing-conformance/sim/llmd/prefixcache"
)

// sharedPrefix is ~500 characters every prompt starts with.
var sharedPrefix = strings.Repeat("You are a careful assistant for the routing conformance suite. ", 8)

func chat(prompt string, stream bool) string {
	return fmt.Sprintf(`{"model":"Qwen/Qwen3-0.6B","stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, prompt)
}

func TestSGLangPrefixSharingChatStaysOnOneReplica(t *testing.T) {
	r := startRouter(t, podOpts{config: "sglang-server.yaml", kinds: []string{"server", "server"}})
	r.waitStarted()
	for i := 0; i < 20; i++ {
		resp, body := r.post("/v1/chat/completions", chat(sharedPrefix+fmt.Sprintf("question %d?", i), i%2 == 1), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	a, b := r.engines[0].Requests.Load(), r.engines[1].Requests.Load()
	// Queue and KV scores tie (unlabelled SGLang Pods use the default vLLM
	// metric table, whose families SGLang does not export), so the
	// approximate prefix index decides every request after the first.
	if !(a == 20 && b == 0 || a == 0 && b == 20) {
		t.Fatalf("split %d/%d, want all on one replica", a, b)
	}
}

func TestQueueScorerSteersAwayFromTheLongerQueue(t *testing.T) {
	r := startRouter(t, podOpts{config: "vllm-server.yaml", kinds: []string{"server", "server"}})
	r.waitStarted()
	busy, idle := r.engines[0], r.engines[1]
	busy.Set("vllm:num_requests_waiting", 4)
	idle.Set("vllm:num_requests_waiting", 0)
	busy.Set("vllm:kv_cache_usage_perc", 0.5)
	idle.Set("vllm:kv_cache_usage_perc", 0.5)
	r.waitFor(func() bool {
		return strings.Contains(r.metrics(), `model_server_endpoint="`+busy.Name+`-rank-0",name="qwen-router"} 4`)
	},
		"the scrape to see the busy queue")
	for i := 0; i < 10; i++ {
		// Distinct prompts: no prefix affinity; vLLM's token producer cannot
		// reach its /render Service here, so prefix scores are 0 anyway.
		r.post("/v1/chat/completions", chat(fmt.Sprintf("%d unrelated", i), false), nil)
	}
	if busy.Requests.Load() != 0 || idle.Requests.Load() != 10 {
		t.Fatalf("busy %d idle %d: queue-scorer (max−q)/(max−min) gives the idle endpoint 2 points more", busy.Requests.Load(), idle.Requests.Load())
	}
}

func TestStaleEndpointKeepsItsLastMetricsAndLeavesTheReadyCount(t *testing.T) {
	r := startRouter(t, podOpts{config: "vllm-server.yaml", kinds: []string{"server", "server"},
		extraArgs: []string{"--refresh-prometheus-metrics-interval=50ms", "--metrics-staleness-threshold=300ms"}})
	r.waitStarted()
	stale, fresh := r.engines[0], r.engines[1]
	stale.Set("vllm:num_requests_waiting", 3)
	fresh.Set("vllm:num_requests_waiting", 0)
	r.waitFor(func() bool { return strings.Contains(r.metrics(), `llm_d_epp_ready_endpoints{name="qwen-router"} 2`) }, "2 ready endpoints")
	r.waitFor(func() bool {
		return strings.Contains(r.metrics(), `model_server_endpoint="`+stale.Name+`-rank-0",name="qwen-router"} 3`)
	}, "queue 3 scraped")
	stale.Down.Store(true)
	stale.Set("vllm:num_requests_waiting", 0) // never seen: scrapes fail from now on
	r.waitFor(func() bool {
		m := r.metrics()
		return strings.Contains(m, `llm_d_epp_ready_endpoints{name="qwen-router"} 1`) && strings.Contains(m, `inference_pool_ready_pods{name="qwen-router"} 1`)
	}, "the stale endpoint to leave the ready count")
	m := r.metrics()
	if !strings.Contains(m, `model_server_endpoint="`+stale.Name+`-rank-0",name="qwen-router"} 3`) {
		t.Fatalf("a stale endpoint keeps its last scraped queue:\n%s", m)
	}
	if !strings.Contains(m, `llm_d_epp_datalayer_poll_errors_total{source_type="metrics-data-source"}`) {
		t.Fatalf("failed scrapes count as poll errors:\n%s", m)
	}
	for i := 0; i < 6; i++ {
		r.post("/v1/chat/completions", chat(fmt.Sprintf("%d x", i), false), nil)
	}
	if stale.Requests.Load() != 0 || fresh.Requests.Load() != 6 {
		t.Fatalf("stale %d fresh %d: the EPP still scores a stale endpoint with its last queue (3)", stale.Requests.Load(), fresh.Requests.Load())
	}
}

// families parses /metrics.
func families(t *testing.T, text string) map[string]*dtoFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dtoFamily{}
	for name, f := range fams {
		df := &dtoFamily{help: f.GetHelp(), typ: f.GetType().String()}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			df.series = append(df.series, series{labels, v})
		}
		out[name] = df
	}
	return out
}

type series struct {
	labels map[string]string
	value  float64
}

type dtoFamily struct {
	help, typ string
	series    []series
}

func (f *dtoFamily) find(t *testing.T, want map[string]string) float64 {
	t.Helper()
	for _, s := range f.series {
		ok := len(s.labels) == len(want)
		for k, v := range want {
			ok = ok && s.labels[k] == v
		}
		if ok {
			return s.value
		}
	}
	t.Fatalf("no series %v in %+v", want, f.series)
	return 0
}

func TestMetricsCarryTheEPPNamesLabelsAndLegacyTwins(t *testing.T) {
	r := startRouter(t, podOpts{config: "sglang-server.yaml", kinds: []string{"server"},
		extraArgs: []string{"--refresh-prometheus-metrics-interval=50ms"}})
	r.waitStarted()
	for _, stream := range []bool{false, true} {
		if resp, body := r.post("/v1/chat/completions", chat("hello", stream), nil); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	r.post("/v1/chat/completions", `{"model":"Qwen/Qwen3-0.6B","messages":[]}`, nil) // 400 from the parser
	r.waitFor(func() bool { return strings.Contains(r.metrics(), "llm_d_epp_ready_endpoints") }, "pool gauges")
	f := families(t, r.metrics())
	model := "Qwen/Qwen3-0.6B"
	lbl := map[string]string{"model_name": model, "target_model_name": model, "fairness_id": "default-flow", "priority": "0"}
	if v := f["llm_d_epp_request_total"].find(t, lbl); v != 2 {
		t.Errorf("llm_d_epp_request_total %v, want 2 (scheduled requests)", v)
	}
	if v := f["inference_objective_request_total"].find(t, map[string]string{"model_name": model, "target_model_name": model, "priority": "0"}); v != 2 {
		t.Errorf("legacy request_total %v", v)
	}
	if v := f["llm_d_epp_request_error_total"].find(t, map[string]string{"model_name": "", "target_model_name": "", "fairness_id": "default-flow", "priority": "0", "error_code": "BadRequest"}); v != 1 {
		t.Errorf("request_error_total %v", v)
	}
	f["inference_objective_request_error_total"].find(t, map[string]string{"model_name": "", "target_model_name": "", "error_code": "BadRequest"})
	if v := f["llm_d_epp_request_running"].find(t, lbl); v != 0 {
		t.Errorf("request_running %v after completion", v)
	}
	f["inference_objective_running_requests"].find(t, map[string]string{"model_name": model})
	ttft := f["llm_d_epp_request_ttft_seconds"]
	if ttft.typ != "HISTOGRAM" || ttft.help != "[ALPHA] Time to first token in seconds, measured from request received to first response byte. For non-streaming requests, this equals total request duration." {
		t.Errorf("ttft family %s %q", ttft.typ, ttft.help)
	}
	for _, s := range []string{"true", "false"} {
		l := map[string]string{"streaming": s}
		for k, v := range lbl {
			l[k] = v
		}
		if v := ttft.find(t, l); v != 1 {
			t.Errorf("ttft streaming=%s count %v", s, v)
		}
	}
	ep := r.engines[0].Name + "-rank-0"
	f["llm_d_epp_per_endpoint_queue_size"].find(t, map[string]string{"name": "qwen-router", "model_server_endpoint": ep})
	f["inference_pool_per_pod_queue_size"].find(t, map[string]string{"name": "qwen-router", "model_server_pod": ep})
	f["llm_d_epp_ready_endpoints"].find(t, map[string]string{"name": "qwen-router"})
	f["inference_pool_ready_pods"].find(t, map[string]string{"name": "qwen-router"})
	f["llm_d_epp_info"].find(t, map[string]string{"commit": "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26", "build_ref": "v0.10.0"})
	if f["llm_d_epp_request_total"].help != "[ALPHA] Total number of processed requests." ||
		f["inference_objective_request_total"].help != "[ALPHA] [Deprecated: Use llm_d_epp_request_total] Counter of inference objective requests broken out for each model and target model." {
		t.Errorf("HELP texts: %q / %q", f["llm_d_epp_request_total"].help, f["inference_objective_request_total"].help)
	}
	if f["llm_d_epp_disagg_decision_total"] != nil {
		t.Error("disagg counters register only with a disagg profile handler")
	}
	// SGLang Pods carry no llm-d.ai/engine-type label: the default (vLLM)
	// table finds no family and every scrape is an extract error.
	f["llm_d_epp_datalayer_extract_errors_total"].find(t, map[string]string{"source_type": "metrics-data-source", "extractor_type": "core-metrics-extractor"})
}

func TestPDDecisionsCountedAndPrefillHostHeaderSent(t *testing.T) {
	r := startRouter(t, podOpts{config: "sglang-pd.yaml", kinds: []string{"decode", "prefill"}})
	r.waitStarted()
	decode, prefill := r.engines[0], r.engines[1]
	prompt := chat(strings.Repeat("why? ", 20), false) // 24 pseudo-tokens ≥ nonCachedTokens 8
	for i := 0; i < 2; i++ {
		if resp, body := r.post("/v1/chat/completions", prompt, nil); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		h, _ := decode.Last()
		got := h.Get("x-prefiller-host-port")
		if i == 0 && got != prefill.Addr() {
			t.Errorf("first request: nothing cached, split P/D: x-prefiller-host-port %q want %s", got, prefill.Addr())
		}
		if i == 1 && got != "" {
			t.Errorf("second request: the decode endpoint holds the prompt's block: decode-only, got header %q", got)
		}
	}
	if decode.Requests.Load() != 2 || prefill.Requests.Load() != 0 {
		t.Errorf("the proxy sends to decode (the sidecar prefills): decode %d prefill %d", decode.Requests.Load(), prefill.Requests.Load())
	}
	f := families(t, r.metrics())
	for _, d := range []string{"prefill-decode", "decode-only"} {
		if v := f["llm_d_epp_disagg_decision_total"].find(t, map[string]string{"plugin_name": "disagg-profile-handler",
			"plugin_type": "disagg-profile-handler", "model_name": "Qwen/Qwen3-0.6B", "decision_type": d}); v != 1 {
			t.Errorf("%s = %v", d, v)
		}
		f["llm_d_inference_scheduler_disagg_decision_total"].find(t, map[string]string{"model_name": "Qwen/Qwen3-0.6B", "decision_type": d})
	}
}

// kvBus is an in-process KV-event source the test publishes on.
type kvBus struct {
	mu   sync.Mutex
	subs map[string]func(prefixcache.KVEvent)
}

func (b *kvBus) Subscribe(s prefixcache.Subscriber, deliver func(prefixcache.KVEvent)) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs[s.Address] = deliver
	return func() {
		b.mu.Lock()
		delete(b.subs, s.Address)
		b.mu.Unlock()
	}
}

func (b *kvBus) publish(addr string, ev prefixcache.KVEvent) bool {
	b.mu.Lock()
	f := b.subs[addr]
	b.mu.Unlock()
	if f != nil {
		f(ev)
	}
	return f != nil
}

func TestVLLMPrecisePrefixFollowsEngineKVEvents(t *testing.T) {
	bus := &kvBus{subs: map[string]func(prefixcache.KVEvent){}}
	var render string
	// The token producer dials the tokenizer role's Service; map it to an engine.
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "qwen-server.team-a.svc") {
			addr = render
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	r := startRouter(t, podOpts{config: "vllm-server.yaml", kinds: []string{"server", "server"}, client: client, kv: bus})
	render = r.engines[0].Addr()
	r.waitStarted()
	holder := r.engines[1]
	r.waitFor(func() bool { return bus.publish(holder.IP, prefixcache.KVEvent{Kind: prefixcache.AllBlocksCleared}) }, "KV subscription")
	prompt := strings.Repeat("abcdefgh", 8) // 64 tokens with the fake renderer: 4 blocks of 16
	tokens := make([]uint32, len(prompt))
	for i := range prompt {
		tokens[i] = uint32(prompt[i])
	}
	// The topic names the pod and the model, as llm-d's own deployments
	// configure vLLM's publisher; the model is part of every block key.
	topic := "kv@" + holder.IP + "@Qwen/Qwen3-0.6B"
	bus.publish(holder.IP, prefixcache.KVEvent{Topic: topic, Kind: prefixcache.BlockStored, BlockHashes: []uint64{11, 12, 13, 14}, TokenIDs: tokens, BlockSize: 16})
	for i := 0; i < 5; i++ {
		r.post("/v1/chat/completions", chat(prompt, false), nil)
	}
	if holder.Requests.Load() != 5 {
		t.Fatalf("the endpoint holding all 4 blocks scores 3 more: holder %d other %d; epp:\n%s",
			holder.Requests.Load(), r.engines[0].Requests.Load(), r.eppErr.String())
	}
	bus.publish(holder.IP, prefixcache.KVEvent{Topic: topic, Kind: prefixcache.BlockRemoved, BlockHashes: []uint64{11}})
	holder.Set("vllm:num_requests_waiting", 1) // now only the queue differs
	r.waitFor(func() bool {
		return strings.Contains(r.metrics(), `model_server_endpoint="`+holder.Name+`-rank-0",name="qwen-router"} 1`)
	}, "queue scraped")
	before := r.engines[0].Requests.Load()
	r.post("/v1/chat/completions", chat(prompt, false), nil)
	if r.engines[0].Requests.Load() != before+1 {
		t.Fatal("with the first block evicted the longest prefix is 0 blocks: the shorter queue wins")
	}
	_ = time.Second
}
