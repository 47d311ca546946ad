package datalayer_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	"github.com/gpustack/routing-conformance/sim/llmd/eppconfig"
	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/llmdtest"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
)

func pool(t *testing.T, ports ...int) datalayer.Pool {
	t.Helper()
	sel, err := labels.Parse(llmdtest.Selector("qwen"))
	if err != nil {
		t.Fatal(err)
	}
	return datalayer.Pool{Namespace: "team-a", Name: "qwen-router", Selector: sel, TargetPorts: ports}
}

func names(ds *datalayer.Datastore) string {
	var s []string
	for _, e := range ds.List() {
		s = append(s, e.Meta.ID()+"@"+e.Meta.HostPort())
	}
	return strings.Join(s, " ")
}

func TestEndpointsAreNamedRankPerTargetPortForReadySelectedPods(t *testing.T) {
	ds := datalayer.NewDatastore(pool(t, 8000, 8001), zaplog.NewSink(io.Discard, 0).Logger())
	ready := llmdtest.EnginePod("qwen-server-abcde", "team-a", "10.0.0.1", "qwen", "server")
	notReady := llmdtest.EnginePod("qwen-server-fghij", "team-a", "10.0.0.2", "qwen", "server")
	notReady.Ready = false
	deleting := llmdtest.EnginePod("qwen-server-klmno", "team-a", "10.0.0.3", "qwen", "server")
	deleting.Deleting = true
	follower := llmdtest.EnginePod("qwen-server-r0-m1", "team-a", "10.0.0.4", "qwen", "server")
	follower.Labels["modeldeployment.gpustack.ai/member-index"] = "1"
	router := datalayer.Pod{Name: "qwen-router-7d9f8-abcde", Namespace: "team-a", IP: "10.0.0.5", Ready: true,
		Labels: map[string]string{"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "qwen",
			"modeldeployment.gpustack.ai/member-index": "0", "modeldeployment.gpustack.ai/router": "llm-d-router"}}
	otherNS := llmdtest.EnginePod("qwen-server-pqrst", "team-b", "10.0.0.6", "qwen", "server")
	ds.Sync([]datalayer.Pod{ready, notReady, deleting, follower, router, otherNS})
	want := "team-a/qwen-server-abcde-rank-0@10.0.0.1:8000 team-a/qwen-server-abcde-rank-1@10.0.0.1:8001"
	if got := names(ds); got != want {
		t.Fatalf("endpoints:\n got %s\nwant %s", got, want)
	}
	ready.Annotations = map[string]string{"llm-d.ai/active-ports": "8001"}
	ds.Sync([]datalayer.Pod{ready})
	if got := names(ds); got != "team-a/qwen-server-abcde-rank-1@10.0.0.1:8001" {
		t.Fatalf("active-ports keeps only the listed target ports: %s", got)
	}
}

func extractor(t *testing.T, params string) *datalayer.Extractor {
	t.Helper()
	x, err := datalayer.NewExtractor("core-metrics-extractor", eppconfig.StrictDecoder([]byte(params)))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	f, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// gauges renders "name value" samples as typed gauges (extractValue reads
// gauges and counters only; an untyped sample reads 0).
func gauges(samples ...string) string {
	var b strings.Builder
	for _, s := range samples {
		name, _, _ := strings.Cut(s, " ")
		name, _, _ = strings.Cut(name, "{")
		b.WriteString("# TYPE " + name + " gauge\n" + s + "\n")
	}
	return b.String()
}

const sglangOnly = `{"engineConfigs":[{"name":"sglang","queuedRequestsSpec":"sglang:num_queue_reqs","runningRequestsSpec":"sglang:num_running_reqs","kvUsageSpec":"sglang:token_usage"}]}`

func TestUnlabelledPodsUseTheDefaultVLLMTable(t *testing.T) {
	x := extractor(t, sglangOnly)
	fams := parse(t, gauges("sglang:num_queue_reqs 3", "sglang:num_running_reqs 1", "sglang:token_usage 0.4"))
	now := time.Unix(100, 0)
	m, updated, err := x.Extract(fams, map[string]string{}, fw.Metrics{}, now)
	if updated || err == nil || !strings.Contains(err.Error(), `metric family "vllm:num_requests_waiting" not found`) {
		t.Fatalf("an SGLang Pod without llm-d.ai/engine-type is read with the vLLM table: updated=%v err=%v", updated, err)
	}
	if !m.UpdateTime.IsZero() {
		t.Fatal("nothing extracted: UpdateTime stays unset")
	}
	m, updated, err = x.Extract(fams, map[string]string{"llm-d.ai/engine-type": "sglang"}, fw.Metrics{}, now)
	if !updated || err != nil || m.WaitingQueueSize != 3 || m.RunningRequestsSize != 1 || m.KVCacheUsagePercent != 0.4 || !m.UpdateTime.Equal(now) {
		t.Fatalf("labelled sglang Pod: %+v %v", m, err)
	}
}

func TestCacheInfoLabelsGiveBlockSizeAndGPUBlocks(t *testing.T) {
	x := extractor(t, `{}`) // built-in vLLM table with cacheInfoSpec
	fams := parse(t, gauges("vllm:num_requests_waiting 0", "vllm:num_requests_running 0", "vllm:kv_cache_usage_perc 0",
		`vllm:cache_config_info{block_size="16",num_gpu_blocks="4096"} 1`))
	m, _, err := x.Extract(fams, nil, fw.Metrics{}, time.Now())
	if err != nil || m.CacheBlockSize != 16 || m.CacheNumBlocks != 4096 {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestMetricSpecsAcceptLabelSelectors(t *testing.T) {
	s, err := datalayer.ParseSpec(`nv_trt_llm_request_metrics{request_type=waiting}`)
	if err != nil || s.Name != "nv_trt_llm_request_metrics" || s.Labels["request_type"] != "waiting" {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := datalayer.ParseSpec("9bad"); err == nil || err.Error() != `not a valid metric specification: "9bad"` {
		t.Fatalf("%v", err)
	}
}

func TestFreshnessIsTheStalenessThresholdFromTheLastExtraction(t *testing.T) {
	now := time.Unix(1000, 0)
	if !datalayer.Fresh(fw.Metrics{UpdateTime: now.Add(-2 * time.Second)}, now, 2*time.Second) {
		t.Error("exactly the threshold old is fresh (<=)")
	}
	if datalayer.Fresh(fw.Metrics{UpdateTime: now.Add(-2*time.Second - time.Nanosecond)}, now, 2*time.Second) {
		t.Error("older than the threshold is stale")
	}
	if datalayer.Fresh(fw.Metrics{}, now, 2*time.Second) {
		t.Error("never extracted is stale")
	}
	s := datalayer.Summarize([]fw.Metrics{{WaitingQueueSize: 1, KVCacheUsagePercent: 0.2}, {WaitingQueueSize: 4, KVCacheUsagePercent: 0.5}})
	if s.Ready != 2 || s.AvgQueue != 2.5 || s.AvgKV != 0.35 || s.StdQueue != 2.12 {
		t.Errorf("pool summary (sample stddev, 2 decimals): %+v", s)
	}
}

func TestCollectorScrapesEveryIntervalAndKeepsMetricsOnFailure(t *testing.T) {
	e := llmdtest.StartEngine(t, "qwen-server-0", "127.0.4.1", 0)
	e.Set("vllm:num_requests_waiting", 2)
	src, err := datalayer.NewSource("metrics-data-source", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := eppmetrics.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := datalayer.NewCollectors(ctx, 20*time.Millisecond, src, []*datalayer.Extractor{extractor(t, `{}`)}, reg)
	ep := &datalayer.Endpoint{Meta: &fw.EndpointMetadata{Namespace: "team-a", Name: "qwen-server-0-rank-0", Address: e.IP,
		Port: "0", MetricsHost: e.Addr()}}
	c.Added(ep)
	waitFor(t, func() bool { return ep.Metrics().WaitingQueueSize == 2 }, "first scrape")
	e.Set("vllm:num_requests_waiting", 5)
	waitFor(t, func() bool { return ep.Metrics().WaitingQueueSize == 5 }, "next scrape within a few intervals")
	e.Down.Store(true)
	e.Set("vllm:num_requests_waiting", 9)
	last := ep.Metrics().UpdateTime
	time.Sleep(100 * time.Millisecond)
	if m := ep.Metrics(); m.WaitingQueueSize != 5 || !m.UpdateTime.Equal(last) {
		t.Fatalf("a failed scrape keeps the last metrics and their time: %+v", m)
	}
	c.Removed(ep)
	cancel()
	c.Wait()
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
