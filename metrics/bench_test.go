package metrics_test

import (
	"testing"

	"github.com/gpustack/routing-conformance/internal/exposition"
	"github.com/gpustack/routing-conformance/metrics"
)

// BenchmarkParseVLLMPage: one engine scrape's parse (the suite parses two per
// replica per spec).
func BenchmarkParseVLLMPage(b *testing.B) {
	page := []byte(exposition.VLLM(model, map[string]int{"stop": 60}, 1, 0, 6000, 4096))
	b.SetBytes(int64(len(page)))
	for b.Loop() {
		if _, err := metrics.ParseText("bench", page); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeltaOverMergedRouters: a filtered delta over a merged snapshot.
func BenchmarkDeltaOverMergedRouters(b *testing.B) {
	workers := map[string]int{}
	for _, w := range []string{"http://127.3.0.7:8000", "http://127.3.0.8:8000", "http://127.3.0.9:8000", "http://127.3.0.10:8000"} {
		workers[w] = 30
	}
	var before, after []metrics.Snapshot
	for _, src := range []string{"router-a", "router-b"} {
		s, _ := metrics.ParseText(src, []byte(exposition.VLLMRouter("round_robin", map[string]int{}, 4)))
		before = append(before, s)
		s, _ = metrics.ParseText(src, []byte(exposition.VLLMRouter("round_robin", workers, 4)))
		after = append(after, s)
	}
	mb, _ := metrics.Merge(before...)
	ma, _ := metrics.Merge(after...)
	rr := metrics.Eq("policy", "round_robin")
	for b.Loop() {
		if _, err := metrics.DeltaBy(mb, ma, "vllm_router_policy_decisions_total", "worker", rr); err != nil {
			b.Fatal(err)
		}
	}
}
