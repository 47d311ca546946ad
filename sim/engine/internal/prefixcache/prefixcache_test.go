package prefixcache

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func seq(start, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(start + i)
	}
	return s
}

func concat(parts ...[]uint32) []uint32 {
	var out []uint32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestVLLMPrefixHitsAreBlockAlignedAndCappedAtNMinus1(t *testing.T) {
	const B = 16
	shared := seq(1000, 100) // 6 full blocks + 4
	for _, tc := range []struct {
		name   string
		second []uint32
		want   int
	}{
		// hits = B*floor(min(S, N-1)/B)
		{"diverges after 100 shared tokens", concat(shared, seq(9000, 50)), B * (100 / B)},
		{"exact repeat of a 100-token prompt caps at N-1=99", shared, B * (99 / B)},
		{"exact repeat of a 96-token prompt caps at 95", shared[:96], B * (95 / B)},
		{"shorter than one block", shared[:15], 0},
		{"17 tokens, one full block shared", shared[:17], B},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewBlockCache(B, 1024)
			if got := c.Match(concat(shared, seq(5000, 30)), ""); got != 0 {
				t.Fatalf("cold cache hit %d tokens", got)
			}
			c.Insert(concat(shared, seq(5000, 30)), "")
			if got := c.Match(tc.second, ""); got != tc.want {
				t.Fatalf("hit %d tokens, want %d", got, tc.want)
			}
		})
	}
}

func TestVLLMCacheSaltSeparatesChains(t *testing.T) {
	c := NewBlockCache(16, 1024)
	p := seq(1, 64)
	c.Insert(p, "tenant-a")
	if got := c.Match(p, "tenant-b"); got != 0 {
		t.Fatalf("other salt hit %d tokens", got)
	}
	if got := c.Match(p, "tenant-a"); got != 48 {
		t.Fatalf("same salt hit %d tokens, want 48", got)
	}
}

func TestVLLMLRUEvictsTailBlocksFirst(t *testing.T) {
	c := NewBlockCache(4, 4)
	a := seq(100, 16) // 4 blocks fill the cache
	c.Insert(a, "")
	c.Insert(seq(500, 8), "") // 2 new blocks evict 2 LRU blocks
	if c.Len() != 4 {
		t.Fatalf("cache holds %d blocks, want 4", c.Len())
	}
	// a's head survives because its tail was evicted first.
	if got := c.Match(concat(a, seq(900, 1)), ""); got != 8 {
		t.Fatalf("after eviction the old chain hits %d tokens, want its 2 head blocks (8)", got)
	}
}

func TestSGLangCachedTokensNMinus1OnExactRepeat(t *testing.T) {
	c := NewRadixCache(1, 1<<20)
	p := seq(7, 37)
	if got := c.Match(p); got != 0 {
		t.Fatalf("cold tree matched %d", got)
	}
	c.Insert(p)
	if got := c.Match(p); got != 36 {
		t.Fatalf("exact repeat matched %d, want N-1=36", got)
	}
	q := concat(p[:20], seq(9000, 10))
	if got := c.Match(q); got != 20 {
		t.Fatalf("shared 20 tokens matched %d", got)
	}
}

func TestSGLangPageSizeRoundsMatchDown(t *testing.T) {
	c := NewRadixCache(16, 1<<20)
	p := seq(7, 100)
	c.Insert(p) // 96 tokens inserted (6 pages)
	if got := c.Match(p); got != 96 {
		t.Fatalf("repeat matched %d, want 96 (N-1=99 rounded down to pages)", got)
	}
	if got := c.Match(concat(p[:40], seq(5000, 30))); got != 32 {
		t.Fatalf("shared 40 matched %d, want 32", got)
	}
}

func TestSGLangSplitKeepsBothBranches(t *testing.T) {
	c := NewRadixCache(1, 1<<20)
	a := concat(seq(1, 10), seq(100, 10))
	b := concat(seq(1, 10), seq(200, 10))
	c.Insert(a)
	c.Insert(b)
	if c.Size() != 30 {
		t.Fatalf("size %d, want 30 (10 shared + 2x10)", c.Size())
	}
	if got := c.Match(concat(a, seq(7, 1))); got != 20 {
		t.Fatalf("branch a matched %d", got)
	}
	if got := c.Match(concat(b, seq(7, 1))); got != 20 {
		t.Fatalf("branch b matched %d", got)
	}
}

func TestSGLangEvictsLeastRecentlyUsedLeaves(t *testing.T) {
	c := NewRadixCache(1, 100)
	old := seq(1, 40)
	hot := seq(1000, 40)
	c.Insert(old)
	c.Insert(hot)
	c.Match(concat(hot, seq(3, 1))) // hot is now most recent
	c.Insert(seq(5000, 40))         // 120 > 100: evict down to 90
	if c.Size() > 100 {
		t.Fatalf("size %d over capacity", c.Size())
	}
	if got := c.Match(concat(hot, seq(3, 1))); got != 40 {
		t.Fatalf("recently used prefix lost (matched %d)", got)
	}
	if got := c.Match(concat(old, seq(3, 1))); got != 0 {
		t.Fatalf("least recently used prefix survived (matched %d)", got)
	}
}

func TestCachesAreSafeForConcurrentUse(t *testing.T) {
	bc := NewBlockCache(16, 64)
	rc := NewRadixCache(1, 2000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				p := seq(r.IntN(50)*10, 20+r.IntN(100))
				bc.Match(p, "")
				bc.Insert(p, "")
				rc.Match(p)
				rc.Insert(p)
			}
		})
	}
	wg.Wait()
	if bc.Len() > 64 || rc.Size() > 2000 {
		t.Fatalf("over capacity: blocks %d, tokens %d", bc.Len(), rc.Size())
	}
}

func BenchmarkBlockCacheMatchInsert(b *testing.B) {
	c := NewBlockCache(16, 1<<16)
	prompts := make([][]uint32, 64)
	for i := range prompts {
		prompts[i] = concat(seq(0, 96), seq(10000*i, 64))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := prompts[i%len(prompts)]
		c.Match(p, "")
		c.Insert(p, "")
		i++
	}
}

func BenchmarkRadixMatchInsert(b *testing.B) {
	c := NewRadixCache(1, 1<<17)
	prompts := make([][]uint32, 64)
	for i := range prompts {
		prompts[i] = concat(seq(0, 96), seq(10000*i, 64))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := prompts[i%len(prompts)]
		c.Match(p)
		c.Insert(p)
		i++
	}
}
