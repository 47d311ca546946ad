package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

func newPolicy(flavor Flavor, name string, cfg Config, opts ...Option) (Policy, error) {
	if flavor != FlavorVR && flavor != FlavorSG {
		return nil, fmt.Errorf("policy: flavor %v is neither FlavorVR nor FlavorSG", flavor)
	}
	if !slices.Contains(Names(flavor), name) {
		return nil, fmt.Errorf("%w %q for %s: --policy accepts %s", ErrUnknownPolicy, name, flavor,
			strings.Join(Names(flavor), ", "))
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	src := o.rand
	if src == nil {
		src = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	b := base{flavor: flavor, name: name, cfg: cfg, rng: &lockedRand{r: rand.New(src)}, now: o.now, logf: o.log}
	switch name {
	case CacheAware:
		return newCacheAware(b), nil
	case RoundRobin:
		return &roundRobin{base: b}, nil
	case Random:
		return &random{base: b}, nil
	case PowerOfTwo:
		return &powerOfTwo{base: b, source: o.loads}, nil
	case ConsistentHash:
		return &consistentHash{base: b}, nil
	case RendezvousHash:
		return &rendezvousHash{base: b}, nil
	case PrefixHash:
		return &prefixHash{base: b}, nil
	case Manual:
		return newManual(b), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownPolicy, name) // unreachable: Names covers every case
}

// validate rejects what the routers' clap types (usize, u64) reject.
func (c Config) validate() error {
	switch {
	case c.BalanceAbsThreshold < 0:
		return fmt.Errorf("policy: BalanceAbsThreshold (--balance-abs-threshold) is %d; it is a usize, use 0 or more", c.BalanceAbsThreshold)
	case c.EvictionInterval < 0:
		return fmt.Errorf("policy: EvictionInterval (--eviction-interval) is %v; use 0 (off) or more", c.EvictionInterval)
	case c.MaxTreeSize < 0:
		return fmt.Errorf("policy: MaxTreeSize (--max-tree-size) is %d; it is a usize, use 0 or more", c.MaxTreeSize)
	case c.MaxIdle < 0:
		return fmt.Errorf("policy: MaxIdle (--max-idle-secs) is %v; use 0 (off) or more", c.MaxIdle)
	case c.PrefixTokenCount < 0:
		return fmt.Errorf("policy: PrefixTokenCount (--prefix-token-count) is %d; use 0 or more", c.PrefixTokenCount)
	case c.LoadCheckInterval < 0:
		return fmt.Errorf("policy: LoadCheckInterval is %v; use 0 or more", c.LoadCheckInterval)
	case c.VirtualNodes < 0:
		return fmt.Errorf("policy: VirtualNodes is %d; use 0 or more (the routers use 160)", c.VirtualNodes)
	}
	return nil
}

// base holds what every policy shares.
type base struct {
	flavor Flavor
	name   string
	cfg    Config
	rng    *lockedRand
	now    func() time.Time
	logf   func(LogRecord)
}

func (b *base) Name() string { return b.name }

// AddWorker and RemoveWorker do nothing for stateless policies.
func (b *base) AddWorker(url, model string) {}
func (b *base) RemoveWorker(url string)     {}

// Run waits for ctx: most policies have no background work.
func (b *base) Run(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (b *base) info(file string, line int, msg string) {
	if b.logf == nil {
		return
	}
	crate := "vllm_router_rs"
	if b.flavor == FlavorSG {
		crate = "smg"
	}
	mod := strings.TrimSuffix(strings.TrimPrefix(file, "src/"), ".rs")
	b.logf(LogRecord{Target: crate + "::" + strings.ReplaceAll(mod, "/", "::"), File: file, Line: line, Message: msg})
}

// picked is the decision for a chosen index; VR records every pick inside the
// policy, SG records every successful pick in the router.
func picked(idx int) Decision { return Decision{Index: idx, Record: true} }

// lockedRand serialises a rand.Rand (not safe for concurrent use).
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// intN is rand's random_range(0..n) for n > 0.
func (l *lockedRand) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// healthyIndices is get_healthy_worker_indices: positions of healthy workers
// in candidate order.
func healthyIndices(ws []Worker) []int {
	out := make([]int, 0, len(ws))
	for i, w := range ws {
		if w != nil && w.Healthy() {
			out = append(out, i)
		}
	}
	return out
}

// minLoadIndex is Rust's min_by_key over healthy indices: the first of the
// least-loaded on ties.
func minLoadIndex(ws []Worker, healthy []int) int {
	best := healthy[0]
	bestLoad := ws[best].Load()
	for _, i := range healthy[1:] {
		if l := ws[i].Load(); l < bestLoad {
			best, bestLoad = i, l
		}
	}
	return best
}

// indexOfURL is Rust's position(): the first worker with the URL, or -1.
func indexOfURL(ws []Worker, url string) int {
	for i, w := range ws {
		if w != nil && w.URL() == url {
			return i
		}
	}
	return -1
}

// runEvery calls f every interval until ctx is done; interval 0 only waits.
func runEvery(ctx context.Context, interval time.Duration, f func()) error {
	if interval <= 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			f()
		}
	}
}
