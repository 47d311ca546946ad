package operator

import (
	"maps"
	"slices"
	"testing"

	"github.com/gpustack/routing-conformance/api"
)

// The emulated webhook keeps its own router/engine table (RouterEngines), as
// the operator does; the suite reads api.Matrix. The two describe the same
// operator, so they must agree row for row, engines in the same order (the
// refusal message lists them in that order).
func TestRouterEnginesAgreeWithTheSuitesMatrix(t *testing.T) {
	var routers []string
	for _, f := range api.Matrix {
		routers = append(routers, f.Router)
		got, ok := RouterEngines[f.Router]
		switch {
		case !ok:
			t.Errorf("api.Matrix has router %s; the emulated webhook's RouterEngines has no row for it", f.Router)
		case !slices.Equal(got, f.Engines):
			t.Errorf("router %s fronts %v in api.Matrix but %v in the emulated webhook's RouterEngines", f.Router, f.Engines, got)
		}
	}
	for _, r := range slices.Sorted(maps.Keys(RouterEngines)) {
		if !slices.Contains(routers, r) {
			t.Errorf("the emulated webhook's RouterEngines has router %s; api.Matrix has no row for it", r)
		}
	}
}
