package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// With the routers built the sim says per pair which code runs; without a
// build their pairs are unsupported, saying what to run.
func TestDescribeNamesTheRouterCodeAndItsLimits(t *testing.T) {
	in := &upstream.Install{Binaries: []upstream.Binary{
		{Path: "/bin/vllm-router", Build: upstream.Build{Router: api.RouterVLLM, Binary: "vllm-router", Package: "vllm-router",
			Version: "0.1.15", Sdist: "vllm_router-0.1.15.tar.gz", SdistSHA256: "aa", HashPinned: true}},
		{Path: "/bin/sgl-model-gateway", Build: upstream.Build{Router: api.RouterSGLang, Binary: "sgl-model-gateway",
			Package: "sglang-router", Version: "0.3.1", Sdist: "sglang_router-0.3.1.tar.gz", SdistSHA256: "bb", HashPinned: true}},
	}}
	for _, tc := range []struct {
		name string
		in   *upstream.Install
		want map[string]string // pair -> implementation and binary; "" unsupported
	}{
		{"no build", nil, map[string]string{"vllm-router+vLLM": "", "sglang-gateway+SGLang": "", "llm-d-router+vLLM": "emulated "}},
		{"built", in, map[string]string{"vllm-router+vLLM": "built from source vllm-router", "sglang-gateway+SGLang": "built from source sgl-model-gateway",
			"llm-d-router+vLLM": "emulated "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{Routers: tc.in})
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
				if want == "" {
					if p.Supported || !strings.Contains(p.Reason, "run `make routers`") {
						t.Errorf("%s without a build: supported %t, reason %q; want unsupported, naming make routers", p.Pair, p.Supported, p.Reason)
					}
					continue
				}
				if p.RouterCode == nil {
					t.Fatalf("%s: no router code", p.Pair)
				}
				if got := p.RouterCode.Implementation + " " + p.RouterCode.Binary; got != want {
					t.Errorf("%s: router code %q, want %q", p.Pair, got, want)
				}
			}
			upstreamRan := tc.in != nil
			if got := strings.Contains(strings.Join(env.Notes, "\n"), "routers built from source: vllm-router 0.1.15 (sdist sha256 aa)"); got != upstreamRan {
				t.Errorf("notes name the builds: %t, want %t: %q", got, upstreamRan, env.Notes)
			}
		})
	}
}
