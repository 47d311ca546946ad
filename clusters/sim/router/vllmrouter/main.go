// Package vllmrouter emulates vllm-router v0.1.15 (vllm-project/router) as a
// sim program: the real flags parsed by clap's rules, the real startup
// output, Kubernetes service discovery through the sim's Pod watcher, every
// VR policy from the routing core, the HTTP surface and the Prometheus
// series, all from docs/routers.md.
//
// Environment knobs (container Env, all optional):
//
//	SIM_ROUTER_SEED  uint64 seed for the per-process random candidate order
//	                 (and the random policies), for reproducible tests.
package vllmrouter

import (
	"context"
	"fmt"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/cli"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/debug"
)

// Main is the vllm-router binary: argv is what follows "vllm-router". It
// returns the exit code: 0 after a graceful shutdown (ctx cancelled =
// SIGTERM), 2 on a clap error, 1 on a configuration or bind error.
func Main(ctx context.Context, c *proc.Container) int {
	out, errw := cli.Streams(c)
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	p("DEBUG: Main function started")
	p("DEBUG: Parsing prefill arguments")
	prefill, filtered, err := splitPrefill(c.Args)
	if err != nil {
		fmt.Fprintf(errw, "Error: %s\n", debug.Str(err.Error()))
		return 1
	}
	p("DEBUG: Prefill URLs parsed: %s", cli.PrefillDebug(prefill))
	p("DEBUG: Parsing CLI arguments with clap")
	p("DEBUG: Filtered args: %s", debug.StrVec(append([]string{binName}, filtered...)))
	m, code := cli.Parse(command(), filtered, out, errw)
	if m == nil {
		return code
	}
	cfg := newConfig(m, prefill)
	p("DEBUG: CLI args parsed successfully")
	p("DEBUG: vllm_pd_disaggregation: %v", cfg.PD)
	cfg.PrintStartup(out, cli.Startup{Name: "VLLM Router", PDMode: "vLLM PD Disaggregated", Unimplemented: []string{"trtllm", "anthropic"}})
	p("DEBUG: Converting to RouterConfig")
	if cfg.PD && cfg.ServiceDiscovery && (len(cfg.PrefillSelector) > 0 || len(cfg.DecodeSelector) > 0) && !cfg.EnableIGW && cfg.Backend != "openai" {
		fmt.Fprintf(errw, "ℹ️  INFO: Using K8s service discovery mode for vLLM PD disaggregation.\n")
		fmt.Fprintf(errw, "   Prefill selector: %s\n", debug.StrVec(m.Values("prefill-selector")))
		fmt.Fprintf(errw, "   Decode selector: %s\n", debug.StrVec(m.Values("decode-selector")))
	}
	if err := cfg.validateMode(); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	p("DEBUG: RouterConfig created successfully")
	p("DEBUG: Validating configuration")
	if err := cfg.ValidateCacheAware(); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	if err := cfg.validateCompatibility(); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	p("DEBUG: Configuration validated successfully")
	p("DEBUG: Creating ServerConfig")
	p("DEBUG: CLI host: %s, port: %d", cfg.Host, cfg.Port)
	p("DEBUG: ServerConfig created successfully - host: %s, port: %d", cfg.Host, cfg.Port)
	p("DEBUG: Creating Tokio runtime")
	p("DEBUG: Tokio runtime created successfully")
	p("DEBUG: Starting server startup function")
	return startup(ctx, c, cfg, out, errw)
}
