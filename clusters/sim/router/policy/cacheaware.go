package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gpustack/routing-conformance/clusters/sim/router/tree"
)

// vrTreeKey is VR's normalize_model_key for its model-less workers.
const vrTreeKey = "default"

// sgUnknownModel is SG's UNKNOWN_MODEL_ID, the key for an empty model id.
const sgUnknownModel = "unknown"

// cacheAware is cache_aware.rs (both routers; docs/routers.md#cache-aware-policy): an imbalance
// check over all candidates' loads first, else a prefix match over one
// shared character tree per model key.
type cacheAware struct {
	base
	mu    sync.Mutex
	trees map[string]*tree.Tree
}

func newCacheAware(b base) *cacheAware {
	return &cacheAware{base: b, trees: map[string]*tree.Tree{}}
}

// treeKey normalises a model id the way each router does.
func (p *cacheAware) treeKey(model string) string {
	if p.flavor == FlavorVR {
		return vrTreeKey
	}
	if model == "" {
		return sgUnknownModel
	}
	return model
}

func (p *cacheAware) treeFor(key string, create bool) *tree.Tree {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.trees[key]
	if t == nil && create {
		t = tree.New()
		p.trees[key] = t
	}
	return t
}

func (p *cacheAware) allTrees() []*tree.Tree {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*tree.Tree, 0, len(p.trees))
	for _, t := range p.trees {
		out = append(out, t)
	}
	return out
}

// AddWorker seeds the worker with insert("", url) in its model's tree.
func (p *cacheAware) AddWorker(url, model string) {
	p.treeFor(p.treeKey(model), true).Insert("", url)
}

// InitWorkers is init_workers: seed every worker and log as VR does.
func (p *cacheAware) InitWorkers(urls []string, model string) {
	if p.flavor == FlavorVR {
		p.info("src/policies/cache_aware.rs", 423,
			"Initializing workers for cache-aware policy: "+strings.Join(urls, ", "))
		if len(urls) > 0 {
			p.info("src/policies/cache_aware.rs", 442,
				fmt.Sprintf("Creating tree for model key: '%s' with %d workers", p.treeKey(model), len(urls)))
		}
	}
	if len(urls) == 0 {
		return
	}
	t := p.treeFor(p.treeKey(model), true)
	for _, u := range urls {
		t.Insert("", u)
	}
}

// RemoveWorker drops the tenant from every tree (remove_worker_by_url).
func (p *cacheAware) RemoveWorker(url string) {
	for _, t := range p.allTrees() {
		t.RemoveTenant(url)
	}
}

// TreeSizes reports characters per worker in the tree of a model key.
func (p *cacheAware) TreeSizes(modelKey string) map[string]int {
	t := p.treeFor(modelKey, false)
	if t == nil {
		return map[string]int{}
	}
	return t.TenantCharCounts()
}

// Run evicts every tree down to MaxTreeSize characters per tenant every
// EvictionInterval (0: never), like the routers' eviction thread.
func (p *cacheAware) Run(ctx context.Context) error {
	return runEvery(ctx, p.cfg.EvictionInterval, func() {
		trees := p.allTrees()
		for _, t := range trees {
			t.EvictTenantsBySize(p.cfg.MaxTreeSize)
		}
	})
}

func (p *cacheAware) Select(ws []Worker, req Request) Decision {
	healthy := healthyIndices(ws)
	if len(healthy) == 0 {
		return None()
	}
	model := req.Model
	if mw, ok := ws[healthy[0]].(ModelWorker); ok {
		model = mw.Model()
	}
	key := p.treeKey(model)

	// Loads over every candidate, healthy or not.
	minLoad, maxLoad := ws[healthy[0]].Load(), ws[healthy[0]].Load()
	for _, w := range ws {
		if w == nil {
			continue
		}
		l := w.Load()
		minLoad, maxLoad = min(minLoad, l), max(maxLoad, l)
	}
	// Both strict, AND; the relative test in f32 as in Rust.
	imbalanced := maxLoad-minLoad > p.cfg.BalanceAbsThreshold &&
		float32(maxLoad) > float32(float32(minLoad)*p.cfg.BalanceRelThreshold)
	d := Decision{Index: -1, MaxLoad: maxLoad, MinLoad: minLoad, Imbalanced: imbalanced}
	t := p.treeFor(key, false)

	if imbalanced {
		// Shortest queue; the tree still learns the text.
		d.Index, d.Record = minLoadIndex(ws, healthy), true
		if t != nil {
			t.Insert(req.Text, ws[d.Index].URL())
		}
		return d
	}
	if t == nil {
		// No tree for the model: a random healthy worker.
		d.Index, d.Record = healthy[p.rng.intN(len(healthy))], true
		return d
	}

	matched, tenant := t.PrefixMatch(req.Text)
	var rate float32
	if n := utf8.RuneCountInString(req.Text); n > 0 {
		rate = float32(matched) / float32(n)
	}
	hit := rate > p.cfg.CacheThreshold
	idx := -1
	if hit {
		if i := indexOfURL(ws, tenant); i >= 0 && ws[i].Healthy() {
			idx = i
		}
	} else {
		idx = minLoadIndex(ws, healthy)
	}
	if idx >= 0 {
		t.Insert(req.Text, ws[idx].URL())
		d.Index, d.Record = idx, true
		return d
	}
	// The cached tenant is gone or unhealthy: forget it and take the first
	// healthy worker, without teaching the tree (as the source does).
	t.RemoveTenant(tenant)
	d.Index, d.Record = healthy[0], true
	return d
}
