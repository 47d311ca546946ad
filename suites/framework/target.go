package framework

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
)

// Target is what every spec needs from the suite: the config, the target
// cluster and what the target said about itself.
type Target struct {
	Config  *config.Config
	Cluster clusters.Cluster
	Env     clusters.Environment
	// RunID names the run on every process (the kube target's namespace
	// label, the edit guard's file).
	RunID string
}

// RequireConfigured skips a pair the config does not qualify.
func (t Target) RequireConfigured(p api.Pair) {
	GinkgoHelper()
	if !slices.Contains(t.Config.Pairs(), p) {
		Skip(fmt.Sprintf("%s is not qualified in this run: %s lists routers %v and engines %v", p, t.Config.File(), routerNames(t.Config), engineNames(t.Config)))
	}
}

// RequireRunnable skips a pair the config does not qualify or the target
// cannot run, with the target's reason.
func (t Target) RequireRunnable(p api.Pair) {
	GinkgoHelper()
	t.RequireConfigured(p)
	if ok, reason := t.Env.Supports(p.Router, p.Engine); !ok {
		Skip(fmt.Sprintf("target %s cannot run %s: %s", t.Env.Target, p, reason))
	}
}

func routerNames(c *config.Config) []string {
	var out []string
	for _, r := range c.Routers {
		out = append(out, r.Name)
	}
	return out
}

func engineNames(c *config.Config) []string {
	var out []string
	for _, e := range c.Engines {
		out = append(out, e.Name)
	}
	return out
}

// IntervalOf is the [timeout, poll] of op for claim; an unknown key fails.
func IntervalOf(cfg *config.Config, claim, op string) config.Interval {
	GinkgoHelper()
	iv, err := cfg.Interval(claim, op)
	Expect(err).NotTo(HaveOccurred())
	return iv
}

// HangSlack is how far past its interval a wait on a call that hangs may
// end: the time to cancel the call and hand its error to the wait, not
// another timeout (the wait's deadline bounds each call).
const HangSlack = 500 * time.Millisecond

// withinDeadline bounds the context Gomega hands a polled function by the
// wait's deadline. Gomega passes the spec's context unchanged, so without
// this one call that hangs (a scrape of a /metrics that never answers)
// runs on to its own client timeout, past the interval. The deadline is
// taken just before Gomega starts its timer, so a hung call ends first and
// the wait's failure carries that call's error. Polled functions without a
// context are returned as they are.
func withinDeadline(deadline time.Time, f any) any {
	bound := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithDeadline(ctx, deadline)
	}
	switch f := f.(type) {
	case func(Gomega, context.Context):
		return func(g Gomega, ctx context.Context) {
			ctx, cancel := bound(ctx)
			defer cancel()
			f(g, ctx)
		}
	case func(context.Context) error:
		return func(ctx context.Context) error {
			ctx, cancel := bound(ctx)
			defer cancel()
			return f(ctx)
		}
	case func(context.Context) bool:
		return func(ctx context.Context) bool {
			ctx, cancel := bound(ctx)
			defer cancel()
			return f(ctx)
		}
	}
	return f
}

// Settle polls read with the interval of in's claim/op until m matches
// what it read, like Eventually, but returns the last reading (and read's
// last error) instead of failing, so the caller can record the evidence
// before it asserts with Expect(last).To(m).
func Settle[T any](ctx context.Context, in Spec, op string, read func(context.Context) (T, error), m types.GomegaMatcher) (T, error) {
	GinkgoHelper()
	var last T
	var lastErr error
	quiet := NewGomega(func(string, ...int) {})
	iv := in.Interval(op)
	quiet.Eventually(ctx, withinDeadline(time.Now().Add(iv.Timeout.D()), func(ctx context.Context) bool {
		v, err := read(ctx)
		if lastErr = err; err != nil {
			return false
		}
		last = v
		ok, err := m.Match(v)
		return err == nil && ok
	})).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D()).Should(BeTrue())
	if lastErr == nil && ctx.Err() != nil {
		lastErr = ctx.Err()
	}
	return last, lastErr
}
