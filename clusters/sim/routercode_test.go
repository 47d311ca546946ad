package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
)

// With upstream routers the sim says per pair which code runs, and limits
// exactly the claims a static worker list cannot judge, on those pairs.
func TestDescribeNamesTheRouterCodeAndItsLimits(t *testing.T) {
	in := &upstream.Install{Wheels: []upstream.Wheel{
		{Package: "vllm-router", Version: "0.1.15", File: "vllm_router.whl", SHA256: "aa", HashChecked: true},
		{Package: "sglang-router", Version: "0.3.1", File: "sglang_router.whl", SHA256: "bb", HashChecked: true},
	}}
	for _, tc := range []struct {
		name string
		in   *upstream.Install
		want map[string]string // pair -> implementation and package
	}{
		{"emulated", nil, map[string]string{"vllm-router+vLLM": "emulated ", "sglang-gateway+SGLang": "emulated ", "llm-d-router+vLLM": "emulated "}},
		{"upstream", in, map[string]string{"vllm-router+vLLM": "upstream vllm-router", "sglang-gateway+SGLang": "upstream sglang-router",
			"llm-d-router+vLLM": "emulated "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{UpstreamRouters: tc.in})
			defer c.Close(context.Background())
			env, err := c.Describe(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range env.Pairs {
				want, ok := tc.want[p.Pair.String()]
				if !ok {
					continue
				}
				if p.RouterCode == nil {
					t.Fatalf("%s: no router code", p.Pair)
				}
				if got := p.RouterCode.Implementation + " " + p.RouterCode.Package; got != want {
					t.Errorf("%s: router code %q, want %q", p.Pair, got, want)
				}
			}
			upstreamRan := tc.in != nil
			if got := strings.Contains(strings.Join(env.Notes, "\n"), "upstream Rust code"); got != upstreamRan {
				t.Errorf("notes say upstream code ran: %t, want %t: %q", got, upstreamRan, env.Notes)
			}
			vllm := api.Pair{Router: api.RouterVLLM, Engine: api.EngineVLLM}
			llmd := api.Pair{Router: api.RouterLLMD, Engine: api.EngineVLLM}
			var limiter clusters.ClaimLimiter = c
			if why := limiter.ClaimLimit("killengine", vllm); (why != "") != upstreamRan || upstreamRan && !strings.Contains(why, "static worker list") {
				t.Errorf("killengine on %s: limit %q", vllm, why)
			}
			for _, claim := range []string{"switch", "deleterouter", "routerreplicas", "affinity"} {
				if why := limiter.ClaimLimit(claim, vllm); why != "" {
					t.Errorf("%s is limited on %s: %s", claim, vllm, why)
				}
			}
			if why := limiter.ClaimLimit("killengine", llmd); why != "" {
				t.Errorf("killengine is limited on the emulated %s: %s", llmd, why)
			}
		})
	}
}
