// Package sglanggateway emulates sgl-model-gateway gateway-v0.3.1
// (lightseekorg/smg 7c3502c6) as a sim program: the real flags parsed by
// clap's rules, the real startup output, Kubernetes service discovery (which
// turns IGW mode on), every SG policy from the routing core, the IGW model
// registry, the HTTP surface with SG's JSON errors and the smg_* series, all
// from reference/routers.md.
//
// Environment knobs (container Env, all optional):
//
//	SIM_ROUTER_SEED  uint64 seed for the random policies, for reproducible
//	                 tests (SG's candidate order is registration order).
package sglanggateway

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

// Main is the sgl-model-gateway binary: argv is what follows the command. It
// returns 0 after a graceful shutdown (ctx cancelled = SIGTERM), 2 on a clap
// error, 1 on a configuration or bind error.
func Main(ctx context.Context, c *proc.Container) int {
	out, errw := writerOr(c.Stdout), writerOr(c.Stderr)
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	// main checks for version flags before anything else.
	for _, a := range c.Args {
		if a == "--version" || a == "-V" {
			p("%s %s", binName, Version)
			return 0
		}
	}
	prefill, filtered := splitPrefill(c.Args)
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
	if cfg.serviceDisc && !cfg.enableIGW {
		p("INFO: IGW mode automatically enabled because service discovery is turned on")
		cfg.enableIGW = true
	}
	p("SGLang Router starting...")
	p("Host: %s:%d", cfg.host, cfg.port)
	p("Mode: %s", cfg.modeLine())
	switch cfg.backend {
	case "vllm", "trtllm", "anthropic":
		p("WARNING: runtime '%s' not implemented yet; falling back to regular routing. Provide --worker-urls or PD flags as usual.", cfg.backend)
	}
	if !cfg.enableIGW {
		p("Policy: %s", cfg.policy)
		if cfg.pd && len(cfg.prefill) > 0 {
			p("Prefill nodes: %s", prefillDebug(cfg.prefill))
			p("Decode nodes: %s", rustfmt.StrVec(cfg.decode))
		}
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
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
