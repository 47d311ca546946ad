package policy

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Branch labels of SG's policy branch counters.
const (
	BranchNoHealthyWorkers  = "no_healthy_workers"
	BranchNoTokens          = "no_tokens"
	BranchRingHit           = "ring_hit"
	BranchLoadBalanceWalk   = "load_balance_walk"
	BranchFallbackLeastLoad = "fallback_least_load"
	BranchVacant            = "vacant"
	BranchOccupiedHit       = "occupied_hit"
	BranchOccupiedMiss      = "occupied_miss"
	BranchNoRoutingID       = "no_routing_id"
)

// RoutingKeyHeader is the header SG's manual policy routes by.
const RoutingKeyHeader = "X-SMG-Routing-Key"

// prefixHash is SG prefix_hash.rs. It routes by the first PrefixTokenCount
// token ids; the HTTP router never passes token ids, so over HTTP every
// request gets no worker (branch no_tokens).
//
// Deviation, for the token path only (unreachable over HTTP): the source
// hashes tokens with xxh3_64 and places workers on a blake3 ring (150
// virtual nodes "<url>#<i>"); this port uses FNV-1a 64 for both, so with
// token ids the choice of worker differs from SG's while the branch logic
// (ring hit, load walk, least-load fallback) is the same.
type prefixHash struct {
	base
	mu      sync.Mutex
	members []string
	ring    []prefixRingEntry
}

// prefixRingEntry is a virtual node: ring position and candidate URL.
type prefixRingEntry struct {
	pos uint64
	url string
}

// ringFor returns the ring for the candidate URLs, rebuilt only when they
// change (SG's registry rebuilds its ring on membership changes).
func (p *prefixHash) ringFor(ws []Worker) []prefixRingEntry {
	urls := make([]string, 0, len(ws))
	for _, w := range ws {
		if w != nil {
			urls = append(urls, w.URL())
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members != nil && slices.Equal(p.members, urls) {
		return p.ring
	}
	ring := make([]prefixRingEntry, 0, len(urls)*prefixHashVirtualNodes)
	for _, u := range urls {
		for v := 0; v < prefixHashVirtualNodes; v++ {
			ring = append(ring, prefixRingEntry{fnv64([]byte(u + "#" + strconv.Itoa(v))), u})
		}
	}
	sort.Slice(ring, func(a, b int) bool { return ring[a].pos < ring[b].pos })
	p.members, p.ring = urls, ring
	return ring
}

const prefixHashVirtualNodes = 150

func fnv64(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func (p *prefixHash) Select(ws []Worker, req Request) Decision {
	d := None()
	if len(ws) == 0 {
		d.Branch = BranchNoHealthyWorkers
		return d
	}
	if len(req.TokenIDs) == 0 {
		d.Branch = BranchNoTokens
		return d
	}
	n := min(len(req.TokenIDs), p.cfg.PrefixTokenCount)
	buf := make([]byte, 4*n)
	for i, t := range req.TokenIDs[:n] {
		binary.LittleEndian.PutUint32(buf[4*i:], t)
	}
	key := fmt.Sprintf("%016x", fnv64(buf))

	healthy := healthyIndices(ws)
	if len(healthy) == 0 {
		d.Branch = BranchNoHealthyWorkers
		return d
	}
	var total int64
	for _, i := range healthy {
		total += ws[i].Load()
	}
	loadOK := func(l int64) bool {
		if total == 0 {
			return true
		}
		avg := float64(total+1) / float64(len(healthy))
		return float64(l) <= avg*float64(p.cfg.PrefixHashLoadFactor)
	}
	// First healthy URL clockwise from the key, each worker checked once.
	ring := p.ringFor(ws)
	kp := fnv64([]byte(key))
	start := sort.Search(len(ring), func(i int) bool { return ring[i].pos >= kp })
	checked := map[string]bool{}
	for k := 0; k < len(ring); k++ {
		u := ring[(start+k)%len(ring)].url
		if checked[u] {
			continue
		}
		checked[u] = true
		idx := indexOfURL(ws, u)
		if idx < 0 || !ws[idx].Healthy() {
			continue
		}
		if loadOK(ws[idx].Load()) {
			d.Index, d.Record, d.Branch = idx, true, BranchRingHit
			return d
		}
		best := -1
		for _, i := range healthy {
			if loadOK(ws[i].Load()) && (best < 0 || ws[i].Load() < ws[best].Load()) {
				best = i
			}
		}
		if best < 0 {
			best = idx
		}
		d.Index, d.Record, d.Branch = best, true, BranchLoadBalanceWalk
		return d
	}
	d.Index, d.Record, d.Branch = minLoadIndex(ws, healthy), true, BranchFallbackLeastLoad
	return d
}

// manual is SG manual.rs: sticky routing by the X-SMG-Routing-Key header.
// A new key gets a random healthy worker; a key whose workers are all
// unhealthy gets another random one, remembered beside the last (at most 2
// candidates); without the header the pick is random.
type manual struct {
	base
	mu      sync.Mutex
	entries map[string]*manualEntry
}

const manualMaxCandidates = 2

type manualEntry struct {
	urls       []string
	lastAccess time.Time
}

func newManual(b base) *manual { return &manual{base: b, entries: map[string]*manualEntry{}} }

func (p *manual) CacheEntries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

func (p *manual) Select(ws []Worker, req Request) Decision {
	healthy := healthyIndices(ws)
	if len(healthy) == 0 {
		d := None()
		d.Branch = BranchNoHealthyWorkers
		return d
	}
	key, ok := firstHeader(req.Headers, RoutingKeyHeader)
	if !ok || key == "" {
		d := picked(healthy[p.rng.intN(len(healthy))])
		d.Branch = BranchNoRoutingID
		return d
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	e, found := p.entries[key]
	if !found {
		idx := healthy[p.rng.intN(len(healthy))]
		p.entries[key] = &manualEntry{urls: []string{ws[idx].URL()}, lastAccess: now}
		d := picked(idx)
		d.Branch = BranchVacant
		return d
	}
	e.lastAccess = now
	for _, u := range e.urls {
		if i := indexOfURL(ws, u); i >= 0 && contains(healthy, i) {
			d := picked(i)
			d.Branch = BranchOccupiedHit
			return d
		}
	}
	idx := healthy[p.rng.intN(len(healthy))]
	for len(e.urls) >= manualMaxCandidates {
		e.urls = e.urls[1:]
	}
	e.urls = append(e.urls, ws[idx].URL())
	d := picked(idx)
	d.Branch = BranchOccupiedMiss
	return d
}

// Run evicts keys idle for MaxIdle or longer, every EvictionInterval (both
// must be non-zero, as in the source).
func (p *manual) Run(ctx context.Context) error {
	interval := p.cfg.EvictionInterval
	if p.cfg.MaxIdle <= 0 {
		interval = 0
	}
	return runEvery(ctx, interval, p.evictIdle)
}

func (p *manual) evictIdle() {
	p.mu.Lock()
	now := p.now()
	before := len(p.entries)
	for k, e := range p.entries {
		if now.Sub(e.lastAccess) >= p.cfg.MaxIdle {
			delete(p.entries, k)
		}
	}
	evicted, remaining := before-len(p.entries), len(p.entries)
	p.mu.Unlock()
	if evicted > 0 {
		p.info("src/policies/manual.rs", 130, fmt.Sprintf(
			"ManualPolicy TTL eviction: evicted %d entries, remaining %d (max_idle: %ds)",
			evicted, remaining, int64(p.cfg.MaxIdle/time.Second)))
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
