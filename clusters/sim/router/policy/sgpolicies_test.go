package policy

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestPrefixHashNoTokensNoWorker(t *testing.T) {
	p := mustNew(t, FlavorSG, PrefixHash, DefaultConfig())
	ws := workers("http://a:1", "http://b:1")
	d := p.Select(ws, Request{Text: "HTTP requests carry text, never token ids"})
	if d.Index != -1 || d.Record || d.Branch != "no_tokens" {
		t.Fatalf("%+v, want no worker with branch no_tokens", d)
	}
	if d := p.Select(nil, Request{TokenIDs: []uint32{1}}); d.Branch != "no_healthy_workers" {
		t.Fatalf("no workers: %+v", d)
	}
}

func TestPrefixHashTokenPathIsStickyByPrefix(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefixTokenCount = 4
	p := mustNew(t, FlavorSG, PrefixHash, cfg)
	ws := workers("http://a:1", "http://b:1", "http://c:1")
	first := p.Select(ws, Request{TokenIDs: []uint32{1, 2, 3, 4, 5}})
	if first.Index < 0 || first.Branch != BranchRingHit {
		t.Fatalf("%+v", first)
	}
	// Tokens past PrefixTokenCount do not matter.
	if d := p.Select(ws, Request{TokenIDs: []uint32{1, 2, 3, 4, 99, 98}}); d.Index != first.Index {
		t.Fatalf("same prefix moved to %d", d.Index)
	}
	// An overloaded ring target gives way to the least loaded acceptable worker.
	fw(ws[first.Index]).load.Store(100)
	if d := p.Select(ws, Request{TokenIDs: []uint32{1, 2, 3, 4}}); d.Index == first.Index || d.Branch != BranchLoadBalanceWalk {
		t.Fatalf("overloaded target kept: %+v", d)
	}
}

func TestManualStickyKey(t *testing.T) {
	p := mustNew(t, FlavorSG, Manual, DefaultConfig(), seeded(21))
	ws := workers("http://a:1", "http://b:1", "http://c:1")
	firstPick := map[string]int{}
	for _, key := range []string{"k1", "k2", "k3", "k4"} {
		d := p.Select(ws, Request{Headers: hdr(RoutingKeyHeader, key)})
		if d.Branch != "vacant" || !d.Record {
			t.Fatalf("first sight of %s: %+v", key, d)
		}
		firstPick[key] = d.Index
	}
	for i := 0; i < 10; i++ {
		for key, want := range firstPick {
			d := p.Select(ws, Request{Headers: hdr("x-smg-routing-key", key)})
			if d.Index != want || d.Branch != "occupied_hit" {
				t.Fatalf("key %s: %+v, want sticky %d", key, d, want)
			}
		}
	}
	if n := p.(CacheEntries).CacheEntries(); n != 4 {
		t.Fatalf("cache entries %d, want 4", n)
	}
}

func TestManualFailoverToSecondCandidate(t *testing.T) {
	p := mustNew(t, FlavorSG, Manual, DefaultConfig(), seeded(5))
	ws := workers("http://a:1", "http://b:1", "http://c:1")
	req := Request{Headers: hdr(RoutingKeyHeader, "session-1")}
	a := p.Select(ws, req).Index
	fw(ws[a]).healthy.Store(false)
	miss := p.Select(ws, req)
	if miss.Branch != "occupied_miss" || miss.Index == a || miss.Index < 0 {
		t.Fatalf("failover: %+v", miss)
	}
	b := miss.Index
	// The first candidate recovers: it is tried first again.
	fw(ws[a]).healthy.Store(true)
	if d := p.Select(ws, req); d.Index != a || d.Branch != "occupied_hit" {
		t.Fatalf("after recovery: %+v, want first candidate %d", d, a)
	}
	// The first candidate fails again: the second remembered one, a hit.
	fw(ws[a]).healthy.Store(false)
	if d := p.Select(ws, req); d.Index != b || d.Branch != "occupied_hit" {
		t.Fatalf("second candidate: %+v, want %d", d, b)
	}
	// Both remembered candidates down: a third pick, and the oldest is dropped.
	fw(ws[b]).healthy.Store(false)
	c := p.Select(ws, req)
	if c.Branch != "occupied_miss" || c.Index == a || c.Index == b {
		t.Fatalf("third: %+v", c)
	}
	fw(ws[a]).healthy.Store(true)
	fw(ws[b]).healthy.Store(true)
	if d := p.Select(ws, req); d.Index != b {
		t.Fatalf("candidates should now be [b c] (bounded to 2): picked %d, want %d", d.Index, b)
	}
}

func TestManualWithoutHeaderIsRandom(t *testing.T) {
	p := mustNew(t, FlavorSG, Manual, DefaultConfig(), seeded(8))
	ws := workers("http://a:1", "http://b:1", "http://c:1")
	seen := map[int]bool{}
	for i := 0; i < 100; i++ {
		req := Request{}
		if i%2 == 0 {
			req.Headers = hdr(RoutingKeyHeader, "") // empty counts as absent
		}
		d := p.Select(ws, req)
		if d.Branch != "no_routing_id" || !d.Record {
			t.Fatalf("%+v", d)
		}
		seen[d.Index] = true
	}
	if len(seen) != 3 {
		t.Fatalf("picks %v are not random", seen)
	}
	if n := p.(CacheEntries).CacheEntries(); n != 0 {
		t.Fatalf("no key remembered, got %d entries", n)
	}
	for _, w := range ws {
		fw(w).healthy.Store(false)
	}
	if d := p.Select(ws, Request{Headers: hdr(RoutingKeyHeader, "k")}); d.Index != -1 || d.Branch != "no_healthy_workers" {
		t.Fatalf("%+v", d)
	}
}

// fakeClock is a settable time source.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestManualIdleKeysEvictedAfterMaxIdle(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1700000000, 0)}
	cfg := DefaultConfig()
	cfg.EvictionInterval = 2 * time.Millisecond
	cfg.MaxIdle = time.Hour
	var sink logSink
	p := mustNew(t, FlavorSG, Manual, cfg, WithClock(clock.Now), sink.opt(), seeded(1))
	ws := workers("http://a:1", "http://b:1")
	p.Select(ws, Request{Headers: hdr(RoutingKeyHeader, "old")})
	clock.Advance(30 * time.Minute)
	p.Select(ws, Request{Headers: hdr(RoutingKeyHeader, "recent")})
	clock.Advance(30 * time.Minute) // "old" idle exactly 1h, "recent" 30m

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.(CacheEntries).CacheEntries() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("entries %d, want 1", p.(CacheEntries).CacheEntries())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if d := p.Select(ws, Request{Headers: hdr(RoutingKeyHeader, "recent")}); d.Branch != "occupied_hit" {
		t.Fatalf("recent key lost: %+v", d)
	}
	if d := p.Select(ws, Request{Headers: hdr(RoutingKeyHeader, "old")}); d.Branch != "vacant" {
		t.Fatalf("old key kept: %+v", d)
	}
	if sink.count("ManualPolicy TTL eviction: evicted 1 entries, remaining 1 (max_idle: 3600s)") != 1 {
		t.Fatalf("logs %q", sink.messages())
	}
}
