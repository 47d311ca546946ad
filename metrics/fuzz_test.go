package metrics_test

import (
	"testing"

	"github.com/gpustack/routing-conformance/internal/exposition"
	"github.com/gpustack/routing-conformance/metrics"
)

// FuzzParseMetricsAndDelta feeds arbitrary pages through the whole query
// path: nothing may panic, and a counter delta is never negative without an
// error.
func FuzzParseMetricsAndDelta(f *testing.F) {
	f.Add(exposition.VLLM(model, map[string]int{"stop": 1}, 0, 0, 10, 0), exposition.VLLM(model, map[string]int{"stop": 5}, 1, 0, 50, 16), "vllm:request_success_total", "finished_reason")
	f.Add(exposition.SGLang(model, 1, 8, 0, 0), exposition.SGLang(model, 3, 30, 7, 1), "sglang:num_requests_total", "model_name")
	f.Add(exposition.VLLMRouter("round_robin", map[string]int{"http://a:8000": 2}, 1), exposition.VLLMRouter("round_robin", map[string]int{"http://a:8000": 1, "http://b:8000": 4}, 2), "vllm_router_policy_decisions_total", "worker")
	f.Add(exposition.SMG("cache_aware", model, 3, []string{"http://a:8000"}), exposition.SMG("cache_aware", model, 9, []string{"http://a:8000"}), "smg_worker_selection_total", "policy")
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n", "# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_count 1\n", "h_count", "le")
	f.Add("# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 1\ns_count 1\n", "{\"utf8.name\"} 1\n", "s", "quantile")
	f.Add("x{a=\"1\" 2\n", "x NaN\nx +Inf\n", "x", "a")
	f.Fuzz(func(t *testing.T, beforeText, afterText, name, label string) {
		before, err1 := metrics.ParseText("before", []byte(beforeText))
		after, err2 := metrics.ParseText("after", []byte(afterText))
		if err1 != nil || err2 != nil {
			return
		}
		_ = before.Names()
		_, _ = before.Sum(name)
		_, _ = before.SumBy(name, label)
		_, _ = metrics.Merge(before, metrics.Snapshot{Sources: []string{"x"}, Samples: after.Samples})
		d, err := metrics.Delta(before, after, name, metrics.Has(label))
		if err == nil && d < 0 && after.TypeOf(name) == "counter" && before.TypeOf(name) == "counter" {
			t.Fatalf("counter %s fell by %v without an error", name, -d)
		}
		_, _ = metrics.DeltaBy(before, after, name, label, metrics.Re(label, label))
		for _, s := range after.Samples {
			_ = s.String()
		}
	})
}
