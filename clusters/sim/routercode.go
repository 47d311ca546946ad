package sim

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// builtRuns reports whether router's containers run a built binary.
func (c *Cluster) builtRuns(router string) bool {
	return c.opts.Routers != nil && upstream.Supports(router)
}

// routerCode is which code runs as router's container.
func (c *Cluster) routerCode(router string) *clusters.RouterCode {
	if c.builtRuns(router) {
		b, _ := c.opts.Routers.Binary(router)
		return &clusters.RouterCode{Implementation: clusters.RouterBuilt, Binary: b.Build.Binary, Package: b.Build.Package,
			Version: b.Build.Version, File: b.Build.Sdist, SHA256: b.Build.SdistSHA256, HashChecked: b.Build.HashPinned,
			Patches: b.Build.Patches}
	}
	if in := c.opts.LLMD; router == api.RouterLLMD && in != nil {
		return &clusters.RouterCode{Implementation: clusters.RouterBuilt, Binary: "epp", Package: in.Module,
			Version: in.Version, Commit: in.RouterCommit, SHA256: in.BinarySHA256,
			Emulates: "envoy (docs/upstream-llmd.md#what-stays-emulated)"}
	}
	return &clusters.RouterCode{Implementation: clusters.RouterEmulated,
		Emulates: strings.TrimSuffix(LLMDRouterVersion, " (simulated)")}
}

// describeRouters names the builds that run.
func (c *Cluster) describeRouters(env *clusters.Environment) {
	if c.opts.LLMD != nil {
		env.Notes = append(env.Notes, c.opts.LLMD.Describe()+"; envoy stays emulated; it discovers the engines through a file "+
			"the sim writes from the kubelet's Pods (docs/upstream-llmd.md#the-real-epp-on-the-sim)")
	}
	if c.opts.Routers == nil {
		return
	}
	var built []string
	for _, r := range upstream.Routers() {
		if b, ok := c.opts.Routers.Binary(r); ok {
			built = append(built, fmt.Sprintf("%s %s (sdist sha256 %s)", b.Build.Binary, b.Build.Version, b.Build.SdistSHA256))
		}
	}
	env.Notes = append(env.Notes, "routers built from source: "+strings.Join(built, ", "),
		"the built routers discover their engines themselves, through the sim's Pods API (docs/routers-from-source.md#worker-discovery)")
}
