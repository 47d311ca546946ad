package routerbase

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/tracing"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// Rand is the process's random source: seeded from SIM_ROUTER_SEED when it
// parses as a uint64 (reproducible tests), else from the runtime.
func Rand(c *proc.Container) *rand.Rand {
	if s, ok := c.Env["SIM_ROUTER_SEED"]; ok {
		if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64); err == nil {
			return rand.New(rand.NewPCG(n, n^0x9e3779b97f4a7c15))
		}
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// lockedSource serialises a rand.Source shared by policies.
type lockedSource struct {
	mu  sync.Mutex
	src *rand.Rand
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src.Uint64()
}

// PolicyMaker returns policy.New for flavor and cfg, every policy drawing
// from one locked source seeded from rng (two draws, made now) and logging
// its info lines through log.
func PolicyMaker(flavor policy.Flavor, cfg policy.Config, rng *rand.Rand, log *tracing.Logger) func(name string) (policy.Policy, error) {
	src := &lockedSource{src: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))}
	return func(name string) (policy.Policy, error) {
		return policy.New(flavor, name, cfg,
			policy.WithRandSource(src),
			policy.WithInfoLogger(func(r policy.LogRecord) {
				log.Print(tracing.Info, tracing.Site{Target: r.Target, File: r.File, Line: r.Line}, r.Message)
			}))
	}
}

// Policies are a router's policy instances per pool. In P/D mode both
// routers build one instance for each pool (PoolPolicies), so the pools
// never share a round-robin counter or a cache-aware tree; outside it the
// pools are unused and share the regular instance.
type Policies struct {
	Regular, Prefill, Decode policy.Policy
}

// PoolPolicies is the routers' create_*_pd_router: a new instance for the
// prefill pool from prefill, else main, and another for the decode pool from
// decode, else main (vllm-project/router@e667ebb:src/routers/factory.rs,
// lightseekorg/smg@7c3502c6:src/routers/factory.rs; docs/routers.md#corrections).
func PoolPolicies(mk func(string) (policy.Policy, error), main string, prefill, decode *string) (pre, dec policy.Policy, err error) {
	name := func(p *string) string {
		if p != nil {
			return *p
		}
		return main
	}
	if pre, err = mk(name(prefill)); err != nil {
		return nil, nil, err
	}
	if dec, err = mk(name(decode)); err != nil {
		return nil, nil, err
	}
	return pre, dec, nil
}

// For is the policy of role's pool.
func (p Policies) For(role workers.Role) policy.Policy {
	switch role {
	case workers.Prefill:
		return p.Prefill
	case workers.Decode:
		return p.Decode
	}
	return p.Regular
}

// Run runs each distinct instance's background work in g.
func (p Policies) Run(g *Group) {
	var seen []policy.Policy
	for _, pol := range []policy.Policy{p.Regular, p.Prefill, p.Decode} {
		dup := false
		for _, q := range seen {
			if q == pol {
				dup = true
			}
		}
		if dup {
			continue
		}
		seen = append(seen, pol)
		g.Go(func(ctx context.Context) { _ = pol.Run(ctx) })
	}
}
