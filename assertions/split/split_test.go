package split_test

import (
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/internal/exposition"
	"github.com/gpustack/routing-conformance/metrics"
)

const model = "Qwen/Qwen3-0.6B"

// replicas starts one /metrics server per replica name.
func replicas(t *testing.T, names ...string) (map[string]*exposition.Server, map[string]string) {
	t.Helper()
	es, urls := map[string]*exposition.Server{}, map[string]string{}
	for _, n := range names {
		es[n] = exposition.Serve(t, "")
		urls[n] = es[n].URL
	}
	return es, urls
}

func scrapeAll(t *testing.T, urls map[string]string) map[string]metrics.Snapshot {
	t.Helper()
	out := map[string]metrics.Snapshot{}
	for n, u := range urls {
		s, err := metrics.Scrape(t.Context(), u, metrics.WithSource(n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = s
	}
	return out
}

func TestVLLMSplitSumsFinishedReasons(t *testing.T) {
	es, urls := replicas(t, "md-engine-0", "md-engine-1")
	es["md-engine-0"].Set(exposition.VLLM(model, map[string]int{"stop": 3}, 0, 0, 0, 0))
	es["md-engine-1"].Set(exposition.VLLM(model, nil, 0, 0, 0, 0))
	before := scrapeAll(t, urls)
	es["md-engine-0"].Set(exposition.VLLM(model, map[string]int{"stop": 58, "length": 5}, 0, 0, 0, 0))
	es["md-engine-1"].Set(exposition.VLLM(model, map[string]int{"stop": 60}, 0, 0, 0, 0))
	after := scrapeAll(t, urls)
	s, err := split.FromSnapshots(split.VLLMRequestCounter, []string{"md-engine-0", "md-engine-1"}, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ratio() != "60/60" || s.Total() != 120 || s.Count("md-engine-1") != 60 {
		t.Errorf("split = %s", s.Ratio())
	}
}

func TestSGLangSplitKeepsZeroReplica(t *testing.T) {
	es, urls := replicas(t, "b", "a")
	// SGLang's warm-up request makes the counter exist from start-up.
	es["a"].Set(exposition.SGLang(model, 1, 8, 0, 0))
	es["b"].Set(exposition.SGLang(model, 1, 8, 0, 0))
	before := scrapeAll(t, urls)
	es["a"].Set(exposition.SGLang(model, 41, 20008, 19000, 0))
	after := scrapeAll(t, urls)
	s, err := split.FromSnapshots(split.SGLangRequestCounter, nil, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Replicas, ",") != "a,b" || s.Ratio() != "40/0" || strings.Join(s.Served(), ",") != "a" {
		t.Errorf("split = %v %s", s.Replicas, s.Ratio())
	}
}

func TestSplitErrorsNameTheReplica(t *testing.T) {
	es, urls := replicas(t, "r0", "r1")
	es["r0"].Set(exposition.VLLM(model, map[string]int{"stop": 9}, 0, 0, 0, 0))
	es["r1"].Set(exposition.SGLang(model, 0, 0, 0, 0))
	before := scrapeAll(t, urls)
	es["r0"].Set(exposition.VLLM(model, map[string]int{"stop": 2}, 0, 0, 0, 0))
	after := scrapeAll(t, urls)

	_, err := split.FromSnapshots(split.VLLMRequestCounter, []string{"r0"}, before, after)
	if err == nil || !strings.Contains(err.Error(), `replica "r0"`) || !strings.Contains(err.Error(), "counter reset") {
		t.Errorf("reset: %v", err)
	}
	_, err = split.FromSnapshots(split.VLLMRequestCounter, []string{"r1"}, before, after)
	if err == nil || !strings.Contains(err.Error(), `replica "r1"`) || !metrics.IsNoSeries(err) {
		t.Errorf("no series: %v", err)
	}
	_, err = split.FromSnapshots(split.VLLMRequestCounter, []string{"r2"}, before, after)
	if err == nil || !strings.Contains(err.Error(), `replica "r2" has no before or after snapshot`) {
		t.Errorf("missing snapshot: %v", err)
	}
	if _, err := split.FromSnapshots("x", nil, nil, nil); err == nil {
		t.Error("empty input accepted")
	}
}

func TestFromDeltasOfRouterCounter(t *testing.T) {
	w0, w1, w2 := "http://127.3.0.7:8000", "http://127.3.0.8:8000", "http://127.3.0.9:8000"
	before, _ := metrics.ParseText("router", []byte(exposition.VLLMRouter("round_robin", map[string]int{w0: 1}, 2)))
	after, _ := metrics.ParseText("router", []byte(exposition.VLLMRouter("round_robin", map[string]int{w0: 61, w1: 60}, 2)))
	d, err := metrics.DeltaBy(before, after, "vllm_router_processed_requests_total", "worker")
	if err != nil {
		t.Fatal(err)
	}
	s, err := split.FromDeltas("vllm_router_processed_requests_total", []string{w2, w0}, d)
	if err != nil {
		t.Fatal(err)
	}
	// w2 served nothing and shows; w1 was not listed and is appended.
	if strings.Join(s.Replicas, ",") != w2+","+w0+","+w1 || s.Ratio() != "0/60/60" {
		t.Errorf("%v %s", s.Replicas, s.Ratio())
	}
	if _, err := split.FromDeltas("x", nil, map[string]float64{"a": 1.5}); err == nil || !strings.Contains(err.Error(), "whole number") {
		t.Errorf("fraction: %v", err)
	}
}

func TestTable(t *testing.T) {
	s := split.New(split.VLLMRequestCounter, []string{"md-engine-0", "md-engine-1"}, map[string]int{"md-engine-0": 90, "md-engine-1": 30})
	want := strings.Join([]string{
		"vllm:request_success_total per replica: 90/30 (total 120)",
		"  replica       count   share",
		"  md-engine-0      90   75.0%  ####################",
		"  md-engine-1      30   25.0%  ######",
	}, "\n")
	if got := s.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	empty := split.New("", []string{"a"}, nil)
	if !strings.Contains(empty.String(), "requests per replica: 0 (total 0)") || !strings.Contains(empty.String(), "-") {
		t.Errorf("empty table:\n%s", empty)
	}
	if vs := s.Values(); len(vs) != 2 || vs[0] != 90 {
		t.Errorf("Values = %v", vs)
	}
	if rows := s.Rows(); rows[1] != (split.Row{Replica: "md-engine-1", Count: 30}) {
		t.Errorf("Rows = %v", rows)
	}
}

func TestRequestCounter(t *testing.T) {
	if c, err := split.RequestCounter("SGLang"); err != nil || c != split.SGLangRequestCounter {
		t.Errorf("%v %v", c, err)
	}
	if _, err := split.RequestCounter("trtllm"); err == nil || !strings.Contains(err.Error(), `"vllm" or "sglang"`) {
		t.Errorf("%v", err)
	}
}
