package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/simtest"
)

// A router that exits, or runs and never serves, says why in the failed
// readiness wait itself: the end of its log (the exited run's, when it
// exited), without ANSI codes, within the wait's deadline.
func TestWaitReadyQuotesTheRouterLog(t *testing.T) {
	exits := func(_ context.Context, c *proc.Container) int {
		fmt.Fprintln(c.Stdout, "\x1b[32mstarting\x1b[0m")
		fmt.Fprintln(c.Stderr, "ValueError: Configuration validation failed: cache_threshold 1.5")
		return 1
	}
	hangs := func(ctx context.Context, c *proc.Container) int {
		fmt.Fprintln(c.Stderr, "Waiting for 2 unique hosts to become healthy")
		<-ctx.Done()
		return 0
	}
	for _, tc := range []struct {
		name string
		main proc.Main
		want string
	}{
		{"exits", exits, "the router container's previous log (the run that exited), last 2 lines:\n  starting\n  ValueError: Configuration validation failed"},
		{"never serves", hangs, "the router container's log, last 1 lines:\n  Waiting for 2 unique hosts to become healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, sim.Options{Programs: programs.Registry{VLLMRouter: tc.main, VLLM: simtest.Engine}})
			ctx := ctxT(t, 20*time.Second)
			d, err := c.Deploy(ctx, md("wl", api.RouterVLLM, api.EngineVLLM, 2))
			if err != nil {
				t.Fatal(err)
			}
			wait, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			start := time.Now()
			err = d.WaitReady(wait, 10*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WaitReady: %v\nwant it to contain %q", err, tc.want)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("the failed wait took %s, past its 1.5 s deadline", took)
			}
		})
	}
}
