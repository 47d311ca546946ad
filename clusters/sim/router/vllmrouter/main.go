// Package vllmrouter emulates vllm-router v0.1.15 (vllm-project/router) as a
// sim program: the real flags parsed by clap's rules, the real startup
// output, Kubernetes service discovery through the sim's Pod watcher, every
// VR policy from the routing core, the HTTP surface and the Prometheus
// series, all from reference/routers.md.
//
// Environment knobs (container Env, all optional):
//
//	SIM_ROUTER_SEED  uint64 seed for the per-process random candidate order
//	                 (and the random policies), for reproducible tests.
package vllmrouter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/clap"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rustfmt"
)

// Main is the vllm-router binary: argv is what follows "vllm-router". It
// returns the exit code: 0 after a graceful shutdown (ctx cancelled =
// SIGTERM), 2 on a clap error, 1 on a configuration or bind error.
func Main(ctx context.Context, c *proc.Container) int {
	out, errw := writerOr(c.Stdout), writerOr(c.Stderr)
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	p("DEBUG: Main function started")
	p("DEBUG: Parsing prefill arguments")
	prefill, filtered, err := splitPrefill(c.Args)
	if err != nil {
		fmt.Fprintf(errw, "Error: %s\n", rustfmt.Str(err.Error()))
		return 1
	}
	p("DEBUG: Prefill URLs parsed: %s", prefillDebug(prefill))
	p("DEBUG: Parsing CLI arguments with clap")
	p("DEBUG: Filtered args: %s", rustfmt.StrVec(append([]string{binName}, filtered...)))
	m, err := clap.Parse(command(), filtered)
	if err != nil {
		var ce *clap.Error
		if errors.As(err, &ce) {
			if ce.ToStdout() {
				_, _ = io.WriteString(out, ce.Text)
			} else {
				_, _ = io.WriteString(errw, ce.Text)
			}
			return ce.ExitCode()
		}
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 2
	}
	cfg := newConfig(m, prefill)
	p("DEBUG: CLI args parsed successfully")
	p("DEBUG: vllm_pd_disaggregation: %v", cfg.pd)
	p("VLLM Router starting...")
	p("Host: %s:%d", cfg.host, cfg.port)
	p("Mode: %s", cfg.modeLine())
	if cfg.backend == "trtllm" || cfg.backend == "anthropic" {
		p("WARNING: runtime '%s' not implemented yet; falling back to regular routing. Provide --worker-urls or PD flags as usual.", cfg.backend)
	}
	if !cfg.enableIGW {
		p("Policy: %s", cfg.policy)
		if cfg.pd && len(cfg.prefill) > 0 {
			p("Prefill nodes: %s", prefillDebug(cfg.prefill))
			p("Decode nodes: %s", rustfmt.StrVec(cfg.decode))
		}
	}
	p("DEBUG: Converting to RouterConfig")
	if cfg.pd && cfg.serviceDisc && (len(cfg.prefillSel) > 0 || len(cfg.decodeSel) > 0) && !cfg.enableIGW && cfg.backend != "openai" {
		fmt.Fprintf(errw, "ℹ️  INFO: Using K8s service discovery mode for vLLM PD disaggregation.\n")
		fmt.Fprintf(errw, "   Prefill selector: %s\n", rustfmt.StrVec(m.Values("prefill-selector")))
		fmt.Fprintf(errw, "   Decode selector: %s\n", rustfmt.StrVec(m.Values("decode-selector")))
	}
	if err := cfg.validateMode(); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	p("DEBUG: RouterConfig created successfully")
	p("DEBUG: Validating configuration")
	if err := cfg.validatePolicies(); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	p("DEBUG: Configuration validated successfully")
	p("DEBUG: Creating ServerConfig")
	p("DEBUG: CLI host: %s, port: %d", cfg.host, cfg.port)
	p("DEBUG: ServerConfig created successfully - host: %s, port: %d", cfg.host, cfg.port)
	p("DEBUG: Creating Tokio runtime")
	p("DEBUG: Tokio runtime created successfully")
	p("DEBUG: Starting server startup function")
	return startup(ctx, c, cfg, out, errw)
}

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func prefillDebug(pre []prefillArg) string {
	items := make([]string, len(pre))
	for i, p := range pre {
		port := "None"
		if p.port != nil {
			port = "Some(" + strconv.Itoa(*p.port) + ")"
		}
		items[i] = "(" + rustfmt.Str(p.url) + ", " + port + ")"
	}
	return rustfmt.Vec(items)
}

func secs(n uint64) time.Duration {
	if n > uint64(1<<62)/uint64(time.Second) {
		return time.Duration(1 << 62)
	}
	return time.Duration(n) * time.Second
}

func hostPort(host string, port uint64) string {
	return net.JoinHostPort(host, strconv.FormatUint(port, 10))
}
