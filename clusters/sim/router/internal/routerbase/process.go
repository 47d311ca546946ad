// Package routerbase is the process base both router emulators share,
// because both routers descend from one code base: the background goroutines
// bound to the process, the metrics exporter (metrics.go) and the serving
// listener with graceful shutdown, the seeded randomness and policy instances
// per pool, retries (retry.go), the periodic health checks, the
// circuit-breaker series, the workers waiting for their health gate, and the
// operator's /observer/endpoints patch (observer.go). Each router keeps its
// own startup order, log sites, metric names and admission workflow and
// passes them in.
package routerbase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/tracing"
)

// Group runs a router's background goroutines (exporter, policies, health
// checks, discovery, registrations) under one context. It is not derived
// from Main's: SIGTERM first drains the server, then Stop cancels the group
// and waits, so Main returns with none left.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewGroup returns a running group.
func NewGroup() *Group {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{ctx: ctx, cancel: cancel}
}

// Go runs f in the group.
func (g *Group) Go(f func(ctx context.Context)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(g.ctx)
	}()
}

// Stop cancels the group and waits for its goroutines.
func (g *Group) Stop() {
	g.cancel()
	g.wg.Wait()
}

// ServeMetrics binds the Prometheus exporter on addr and serves reg there
// in g. The error is the exporter's install error, for Panic.
func ServeMetrics(g *Group, c *proc.Container, addr string, reg *prometheus.Registry) error {
	ln, err := c.Listen(addr)
	if err != nil {
		return fmt.Errorf("failed to install Prometheus metrics exporter: FailedToCreateHTTPListener(%q)", err.Error())
	}
	port := 0
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		port = a.Port
	}
	h := c.Faults.Handler(port, metricsHandler(reg))
	g.Go(func(ctx context.Context) { _ = serveMetrics(ctx, ln, h) })
	return nil
}

// Panic writes a Rust panic at the source location at (file:line:col) with
// err as its message, and returns a panicking process's exit code, 101.
func Panic(errw io.Writer, at string, err error) int {
	fmt.Fprintf(errw, "\nthread 'main' panicked at %s:\n%v\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n", at, err)
	return 101
}

// Serve answers h on ln until ctx is done (SIGTERM): then it logs the
// terminate line at site, drains for at most grace and returns 0. A serve
// failure is main's "Error: …" and exit code 1.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, log *tracing.Logger, site tracing.Site, errw io.Writer) int {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info(site, "Received terminate signal, starting graceful shutdown")
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		_ = srv.Shutdown(sctx)
		cancel()
		<-errc
		return 0
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return 0
		}
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
}
