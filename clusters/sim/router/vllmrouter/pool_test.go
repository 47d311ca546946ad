package vllmrouter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
)

// The decode pool is get_decode_workers = get_by_type: the type index, in
// registration order. The prefill (and regular) pool walks the DashMap, in
// the per-process order GET /list_workers shows.
func TestVRDecodePoolInRegistrationOrderPrefillInDashMapOrder(t *testing.T) {
	rt := &router{reg: workers.NewRegistry(workers.OrderRandom, rand.New(rand.NewPCG(1, 2)))}
	var decodes []string
	for i := range 6 {
		u := fmt.Sprintf("http://10.0.0.%d:8000", i)
		rt.reg.Add(workers.New(u, 8000, workers.Decode, workers.CircuitConfig{}))
		decodes = append(decodes, u)
		rt.reg.Add(workers.New(fmt.Sprintf("http://10.0.1.%d:8000", i), 8000, workers.Prefill, workers.CircuitConfig{}))
	}
	urls := func(ws []*workers.Worker) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.URL())
		}
		return out
	}
	if got := urls(rt.pool(workers.Decode)); !slices.Equal(got, decodes) {
		t.Errorf("decode pool %v, want registration order %v", got, decodes)
	}
	var listed []string
	for _, u := range rt.reg.URLs() {
		if strings.HasPrefix(u, "http://10.0.1.") {
			listed = append(listed, u)
		}
	}
	if got := urls(rt.pool(workers.Prefill)); !slices.Equal(got, listed) {
		t.Errorf("prefill pool %v, want the listed (DashMap) order %v", got, listed)
	}
	var dashDecodes []string
	for _, u := range rt.reg.URLs() {
		if slices.Contains(decodes, u) {
			dashDecodes = append(dashDecodes, u)
		}
	}
	if slices.Equal(dashDecodes, decodes) {
		t.Fatal("this seed draws the registration order for the DashMap too: the test could not fail; pick another")
	}
}
