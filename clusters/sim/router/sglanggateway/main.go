// Package sglanggateway emulates sgl-model-gateway gateway-v0.3.1
// (lightseekorg/smg 7c3502c6) as a sim program: the real flags parsed by
// clap's rules, the real startup output, Kubernetes service discovery (which
// turns IGW mode on), every SG policy from the routing core, the IGW model
// registry, the HTTP surface with SG's JSON errors and the smg_* series, all
// from docs/routers.md.
//
// Environment knobs (container Env, all optional):
//
//	SIM_ROUTER_SEED  uint64 seed for the random policies, for reproducible
//	                 tests (SG's candidate order is registration order).
package sglanggateway

import (
	"context"
	"fmt"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/cli"
)

// Main is the sgl-model-gateway binary: argv is what follows the command. It
// returns 0 after a graceful shutdown (ctx cancelled = SIGTERM), 2 on a clap
// error, 1 on a configuration or bind error.
func Main(ctx context.Context, c *proc.Container) int {
	out, errw := cli.Streams(c)
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	// main checks for version flags before anything else.
	for _, a := range c.Args {
		if a == "--version" || a == "-V" {
			p("%s %s", binName, Version)
			return 0
		}
	}
	prefill, filtered := splitPrefill(c.Args)
	m, code := cli.Parse(command(), filtered, out, errw)
	if m == nil {
		return code
	}
	cfg := newConfig(m, prefill)
	if cfg.ServiceDiscovery && !cfg.EnableIGW {
		p("INFO: IGW mode automatically enabled because service discovery is turned on")
		cfg.EnableIGW = true
	}
	cfg.PrintStartup(out, cli.Startup{Name: "SGLang Router", PDMode: "PD Disaggregated", Unimplemented: []string{"vllm", "trtllm", "anthropic"}})
	if err := cfg.ValidateCacheAware(); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	return startup(ctx, c, cfg, out, errw)
}
