package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewAcceptsExactlyEachRoutersPolicies(t *testing.T) {
	if got := strings.Join(Names(FlavorVR), ", "); got != "random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash" {
		t.Fatalf("VR names %s", got)
	}
	if got := strings.Join(Names(FlavorSG), ", "); got != "random, round_robin, cache_aware, power_of_two, prefix_hash, manual" {
		t.Fatalf("SG names %s", got)
	}
	for _, f := range flavors {
		for _, n := range Names(f) {
			p := mustNew(t, f, n, DefaultConfig())
			if p.Name() != n {
				t.Fatalf("Name() = %q, want %q", p.Name(), n)
			}
		}
	}
	for _, c := range []struct {
		f    Flavor
		name string
	}{{FlavorSG, ConsistentHash}, {FlavorSG, RendezvousHash}, {FlavorVR, PrefixHash}, {FlavorVR, Manual}, {FlavorVR, "roundrobin"}} {
		_, err := New(c.f, c.name, DefaultConfig())
		if !errors.Is(err, ErrUnknownPolicy) || !strings.Contains(err.Error(), c.name) {
			t.Fatalf("New(%v, %q) = %v", c.f, c.name, err)
		}
	}
}

func TestNewRejectsNegativeKnobsNamingTheField(t *testing.T) {
	cases := map[string]func(*Config){
		"BalanceAbsThreshold": func(c *Config) { c.BalanceAbsThreshold = -1 },
		"EvictionInterval":    func(c *Config) { c.EvictionInterval = -time.Second },
		"MaxTreeSize":         func(c *Config) { c.MaxTreeSize = -1 },
		"MaxIdle":             func(c *Config) { c.MaxIdle = -time.Second },
		"PrefixTokenCount":    func(c *Config) { c.PrefixTokenCount = -1 },
		"VirtualNodes":        func(c *Config) { c.VirtualNodes = -1 },
	}
	for field, mutate := range cases {
		cfg := DefaultConfig()
		mutate(&cfg)
		if _, err := New(FlavorVR, CacheAware, cfg); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err %v", field, err)
		}
	}
	if _, err := New(Flavor(0), Random, DefaultConfig()); err == nil {
		t.Error("zero flavor accepted")
	}
}

func TestDefaultConfigMatchesRouterDefaults(t *testing.T) {
	c := DefaultConfig()
	if c.CacheThreshold != 0.3 || c.BalanceAbsThreshold != 64 || c.BalanceRelThreshold != 1.5 ||
		c.EvictionInterval != 120*time.Second || c.MaxTreeSize != 67108864 || c.MaxIdle != 14400*time.Second ||
		c.PrefixTokenCount != 256 || c.PrefixHashLoadFactor != 1.25 || c.LoadCheckInterval != 5*time.Second ||
		c.VirtualNodes != 160 {
		t.Fatalf("%+v", c)
	}
}

// Every policy is safe for concurrent Select, membership changes and Run.
func TestPoliciesConcurrentUse(t *testing.T) {
	for _, f := range flavors {
		for _, name := range Names(f) {
			t.Run(f.String()+"/"+name, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.EvictionInterval = time.Millisecond
				cfg.MaxIdle = time.Millisecond
				cfg.MaxTreeSize = 50
				p := mustNew(t, f, name, cfg)
				ws := workers("http://a:1", "http://b:1", "http://c:1")
				addAll(p, ws, "m")
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); _ = p.Run(ctx) }()
				for g := 0; g < 4; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						for i := 0; i < 100; i++ {
							req := Request{Text: fmt.Sprintf("prompt %d %d", g, i%5), Model: "m",
								Headers:  hdr(RoutingKeyHeader, fmt.Sprint(i%3), "X-Session-Id", fmt.Sprint(i%4)),
								TokenIDs: []uint32{uint32(i % 3)}}
							d := p.Select(ws, req)
							if d.Index >= len(ws) {
								t.Errorf("index %d out of range", d.Index)
							}
							if d.Index >= 0 {
								fw(ws[d.Index]).load.Add(1)
								fw(ws[d.Index]).load.Add(-1)
							}
							if i%25 == 0 {
								p.RemoveWorker(ws[g%3].URL())
								p.AddWorker(ws[g%3].URL(), "m")
								if lu, ok := p.(LoadUpdater); ok {
									lu.UpdateLoads(map[string]int64{"http://a:1": int64(i)})
								}
							}
						}
					}(g)
				}
				time.Sleep(5 * time.Millisecond) // let Run tick while selects run
				cancel()
				wg.Wait()
			})
		}
	}
}
