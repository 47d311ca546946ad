package prefixcache

import (
	"testing"
)

// The expectations below are llm-d-router v0.10.0's: processEventBatch in
// llm-d/llm-d-router@71f4f099:pkg/kvevents/pool.go, eventDedupFilter in
// pkg/kvevents/event_dedup_filter.go and InMemoryIndex in
// pkg/kvcache/kvblock/in_memory.go.

const podA, podB = "10.0.0.1:8000", "10.0.0.2:8000"

func seq(n, from int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

func newIndex(t *testing.T) *Precise {
	t.Helper()
	p, err := NewPrecise(PreciseType, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// holds reports how many of keys pod holds.
func (p *Precise) holds(pod string, keys []uint64) int {
	n := 0
	for _, k := range keys {
		if _, ok := p.index[k][pod]; ok {
			n++
		}
	}
	return n
}

func stored(hashes []uint64, parent *uint64, tokens []uint32) KVEvent {
	zero := 0
	return KVEvent{Kind: BlockStored, BlockHashes: hashes, ParentBlockHash: parent, TokenIDs: tokens,
		BlockSize: len(tokens) / max(1, len(hashes)), GroupIdx: &zero, SpecKind: "full_attention"}
}

func removed(hashes ...uint64) KVEvent {
	zero := 0
	return KVEvent{Kind: BlockRemoved, BlockHashes: hashes, GroupIdx: &zero}
}

// The engine hash → request key mapping belongs to the index, not to a pod,
// and a clear leaves it (InMemoryIndex.Clear): a store on another pod, or
// after AllBlocksCleared, whose parent another pod reported, still chains.
func TestEngineMappingIsSharedAndSurvivesClears(t *testing.T) {
	p := newIndex(t)
	toks := seq(32, 1)
	keys := p.Keys("", toks, nil)
	one := uint64(1)
	p.Apply(podA, stored([]uint64{1}, nil, toks[:16]))
	p.Apply(podA, KVEvent{Kind: AllBlocksCleared})
	if got := p.holds(podA, keys); got != 0 {
		t.Fatalf("cleared pod holds %d keys", got)
	}
	p.Apply(podA, stored([]uint64{2}, &one, toks[16:]))
	p.Apply(podB, stored([]uint64{3}, &one, toks[16:]))
	if p.holds(podA, keys[1:]) != 1 || p.holds(podB, keys[1:]) != 1 {
		t.Fatalf("children of a cleared/foreign parent not indexed: a %d b %d", p.holds(podA, keys[1:]), p.holds(podB, keys[1:]))
	}
	unknown := uint64(99)
	p.Apply(podB, stored([]uint64{4}, &unknown, toks[:16]))
	if _, ok := p.engine[4]; ok {
		t.Fatal("a store whose parent hash was never mapped is indexed; pool.go skips it")
	}
}

// eventDedupFilter: every store counts, a removal evicts only when the
// count reaches 0; AllBlocksCleared drops the counts with the entries.
func TestRemovalsAreReferenceCountedPerPod(t *testing.T) {
	p := newIndex(t)
	toks := seq(16, 1)
	keys := p.Keys("", toks, nil)
	p.Apply(podA, stored([]uint64{1}, nil, toks))
	p.Apply(podA, stored([]uint64{1}, nil, toks))
	p.Apply(podA, removed(1))
	if p.holds(podA, keys) != 1 {
		t.Fatal("first of two removals evicted a block stored twice")
	}
	p.Apply(podA, removed(1))
	if p.holds(podA, keys) != 0 {
		t.Fatal("the second removal did not evict")
	}
	// AllBlocksCleared and a Reset (resetForSource) drop the counts too.
	for _, clear := range []KVEventKind{AllBlocksCleared, Reset} {
		p.Apply(podA, stored([]uint64{1}, nil, toks))
		p.Apply(podA, stored([]uint64{1}, nil, toks))
		p.Apply(podA, KVEvent{Kind: clear})
		p.Apply(podA, stored([]uint64{1}, nil, toks))
		if p.Apply(podA, removed(1)); p.holds(podA, keys) != 0 {
			t.Fatalf("counts from before clear kind %d suppressed a removal", clear)
		}
	}
}

// Evict by engine key removes the pod from every request key the hash
// maps to; the mapping goes only when none of them has a pod left.
func TestEvictionDropsThePodFromEveryMappedKeyAndTheMappingLast(t *testing.T) {
	p := newIndex(t) // EPP blocks of 16
	toks := seq(64, 1)
	keys := p.Keys("", toks, nil)
	// One engine block of 64 tokens covers four EPP blocks (1:many).
	p.Apply(podA, stored([]uint64{7}, nil, toks))
	p.Apply(podB, stored([]uint64{7}, nil, toks))
	if len(p.engine[7]) != 4 || p.holds(podA, keys) != 4 {
		t.Fatalf("mapping %v, a holds %d", p.engine[7], p.holds(podA, keys))
	}
	p.Apply(podA, removed(7))
	if p.holds(podA, keys) != 0 {
		t.Fatalf("a still holds %d of the evicted block's keys", p.holds(podA, keys))
	}
	if p.holds(podB, keys) != 4 || len(p.engine[7]) != 4 {
		t.Fatal("evicting a's copy touched b's, or the mapping b still needs")
	}
	p.Apply(podB, removed(7))
	if _, ok := p.engine[7]; ok {
		t.Fatal("the mapping outlived the last pod holding its keys")
	}

	// Many:1: two engine blocks of 8 map onto one EPP block of 16; removing
	// either evicts it.
	p.Apply(podA, stored([]uint64{21, 22}, nil, toks[:16]))
	if p.holds(podA, keys[:1]) != 1 {
		t.Fatal("many:1 store not indexed")
	}
	p.Apply(podA, removed(21))
	if p.holds(podA, keys[:1]) != 0 {
		t.Fatal("removing one of two engine blocks kept the EPP block they share")
	}
}

// blockStoredEventDigestible and the removal guard: grouped events of a
// kind without a prefix chain, or with a ragged token span, are skipped;
// the group's kind is learnt from stores (GroupCatalog).
func TestGroupedEventsAreIndexedOnlyForPrefixKinds(t *testing.T) {
	p := newIndex(t)
	toks := seq(32, 1)
	keys := p.Keys("", toks, nil)
	sw := stored([]uint64{1, 2}, nil, toks)
	one := 1
	sw.GroupIdx, sw.SpecKind = &one, "sliding_window"
	p.Apply(podA, sw)
	if p.holds(podA, keys) != 0 {
		t.Fatal("a sliding-window group's store was indexed")
	}
	ragged := stored([]uint64{1, 2}, nil, toks)
	ragged.BlockSize = 10
	p.Apply(podA, ragged)
	if p.holds(podA, keys) != 0 {
		t.Fatal("a store whose tokens are not one block_size per hash was indexed")
	}
	// Group 0 has not been seen on podB: its removal is skipped.
	p.Apply(podA, stored([]uint64{1, 2}, nil, toks))
	if p.holds(podA, keys) != 2 {
		t.Fatal("full-attention store not indexed")
	}
	p.Apply(podB, KVEvent{Kind: BlockStored, BlockHashes: []uint64{1}, TokenIDs: toks[:16], BlockSize: 16})
	p.Apply(podB, removed(1))
	if p.holds(podB, keys[:1]) != 1 {
		t.Fatal("a removal for a group podB never stored was applied")
	}
	// A store without a kind reads the group's learnt kind.
	noKind := stored([]uint64{3}, nil, seq(16, 500))
	noKind.SpecKind = ""
	p.Apply(podA, noKind)
	if p.holds(podA, p.Keys("", seq(16, 500), nil)) != 1 {
		t.Fatal("a store of a known full-attention group without its kind was skipped")
	}
	p.Apply(podA, removed(1))
	if p.holds(podA, keys) != 1 || p.holds(podA, keys[:1]) != 0 {
		t.Fatal("a removal for a known full-attention group was skipped")
	}
	// Ungrouped events (older vLLM) are indexed and removed as before.
	p.Apply(podB, KVEvent{Kind: BlockRemoved, BlockHashes: []uint64{1}})
	if p.holds(podB, keys) != 0 {
		t.Fatal("ungrouped store/remove")
	}
}

// lora_name replaces the topic's model in the first key's seed.
func TestLoraNameSeedsTheKeys(t *testing.T) {
	p := newIndex(t)
	toks := seq(16, 1)
	ev := stored([]uint64{1}, nil, toks)
	ev.Topic = "kv@pod@base"
	lora := "adapter"
	ev.LoraName = &lora
	p.Apply(podA, ev)
	if p.holds(podA, p.Keys("adapter", toks, nil)) != 1 || p.holds(podA, p.Keys("base", toks, nil)) != 0 {
		t.Fatal("keys not seeded with lora_name")
	}
}
