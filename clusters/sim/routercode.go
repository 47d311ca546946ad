package sim

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim/operator"
	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
)

var _ clusters.ClaimLimiter = (*Cluster)(nil)

// upstreamRuns reports whether router's containers run its upstream code.
func (c *Cluster) upstreamRuns(router string) bool {
	return c.opts.UpstreamRouters != nil && upstream.Supports(router)
}

// routerCode is which code runs as router's container.
func (c *Cluster) routerCode(router string) *clusters.RouterCode {
	if c.upstreamRuns(router) {
		code := c.opts.UpstreamRouters.Code(router, true)
		return &code
	}
	emulates := map[string]string{api.RouterVLLM: VLLMRouterVersion, api.RouterSGLang: SGLangGatewayVersion,
		api.RouterLLMD: LLMDRouterVersion}[router]
	return &clusters.RouterCode{Implementation: clusters.RouterEmulated,
		Emulates: strings.TrimSuffix(emulates, " (simulated)")}
}

// describeUpstream rewrites the router lines of env for a sim whose argv
// routers run upstream code: the router image names what ran, and the
// emulated versions of those routers are no longer in the notes.
func (c *Cluster) describeUpstream(env *clusters.Environment) {
	if c.opts.UpstreamRouters == nil {
		return
	}
	env.RouterImage = fmt.Sprintf("%s (not run: vllm-router and sglang-gateway are their upstream code, llm-d-router is %s)",
		operator.DefaultRouterImage, LLMDRouterVersion)
	notes := []string{
		"vllm-router and sglang-gateway are the routers' upstream Rust code from PyPI behind their Python launchers " +
			"(clusters/sim/upstream, docs/upstream-routers.md); engines and llm-d-router are Go emulators on loopback addresses; there is no GPU",
		"upstream routers get " + upstream.StaticWorkersNote,
	}
	for _, n := range env.Notes {
		if n != VLLMRouterVersion && n != SGLangGatewayVersion && n != emulatorsNote {
			notes = append(notes, n)
		}
	}
	env.Notes = notes
}

// ClaimLimit is why claim cannot be judged on pair: only an upstream
// router's static worker list limits claims (upstream.MembershipClaims).
func (c *Cluster) ClaimLimit(claim string, pair api.Pair) string {
	if !c.upstreamRuns(pair.Router) {
		return ""
	}
	return upstream.StaticLimit(claim)
}
