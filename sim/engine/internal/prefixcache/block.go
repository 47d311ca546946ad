// Package prefixcache holds the two prefix caches the engines emulate:
// vLLM's automatic prefix caching (hash-chained full blocks, LRU eviction)
// and SGLang's RadixAttention (a token radix tree matched at page
// granularity). Both cap a lookup at N-1 tokens because the last prompt token
// is always recomputed to produce the first output logits.
package prefixcache

import (
	"container/list"
	"sync"
)

// BlockCache is vLLM's prefix cache: every full block of BlockSize tokens is
// keyed by hash(parent block hash, the block's token ids), with the request's
// cache_salt mixed into the first block. Only full blocks are cached; freed
// blocks stay until evicted least-recently-used once more than Capacity
// blocks are cached.
type BlockCache struct {
	blockSize int
	capacity  int

	mu     sync.Mutex
	m      map[uint64]*list.Element
	lru    list.List // front = most recently used; values are uint64 hashes
	events BlockEvents
}

// BlockEvents receives what a BlockCache stores and evicts, in order, as
// vLLM's KV-cache event publisher reports it (BlockStored with the new full
// blocks' hashes, the hash of the block before them and their token ids;
// BlockRemoved with evicted hashes; AllBlocksCleared on a reset). Calls are
// made with the cache locked, so they must not call the cache.
type BlockEvents interface {
	Stored(parent *uint64, hashes []uint64, tokens []uint32, blockSize int)
	Removed(hashes []uint64)
	Cleared()
}

// SetEvents makes e receive the cache's block events from now on.
func (c *BlockCache) SetEvents(e BlockEvents) {
	c.mu.Lock()
	c.events = e
	c.mu.Unlock()
}

// NewBlockCache returns a cache of at most capacityBlocks blocks of blockSize
// tokens. Both must be positive.
func NewBlockCache(blockSize, capacityBlocks int) *BlockCache {
	if blockSize < 1 {
		blockSize = 1
	}
	if capacityBlocks < 1 {
		capacityBlocks = 1
	}
	return &BlockCache{blockSize: blockSize, capacity: capacityBlocks, m: make(map[uint64]*list.Element)}
}

// BlockSize is the block size in tokens.
func (c *BlockCache) BlockSize() int { return c.blockSize }

// Match returns how many leading prompt tokens are served from the cache:
// B*floor(min(shared, N-1)/B), as vLLM's get_computed_blocks computes it.
// Matched blocks become most recently used.
func (c *BlockCache) Match(prompt []uint32, salt string) int {
	limit := (len(prompt) - 1) / c.blockSize
	if limit <= 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var buf [64]*list.Element
	return len(c.walk(prompt, limit, salt, false, buf[:0])) * c.blockSize
}

// Insert caches every full block of tokens (prompt, or prompt plus output)
// and evicts least-recently-used blocks beyond the capacity.
func (c *BlockCache) Insert(tokens []uint32, salt string) {
	full := len(tokens) / c.blockSize
	if full == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var buf [64]*list.Element
	if c.events == nil {
		c.walk(tokens, full, salt, true, buf[:0])
	} else {
		c.insertReporting(tokens, full, salt, buf[:0])
	}
	var evicted []uint64
	for c.lru.Len() > c.capacity {
		tail := c.lru.Back()
		h := tail.Value.(uint64)
		delete(c.m, h)
		c.lru.Remove(tail)
		if c.events != nil {
			evicted = append(evicted, h)
		}
	}
	if len(evicted) > 0 {
		c.events.Removed(evicted)
	}
}

// insertReporting is walk with create, reporting each run of newly cached
// blocks as one BlockStored whose parent is the block before the run.
// c.mu must be held.
func (c *BlockCache) insertReporting(tokens []uint32, n int, salt string, out []*list.Element) {
	h := saltSeed(salt)
	var parent *uint64
	var run []uint64
	runStart := 0
	flush := func() {
		if len(run) > 0 {
			c.events.Stored(parent, run, tokens[runStart*c.blockSize:(runStart+len(run))*c.blockSize], c.blockSize)
			run = nil
		}
	}
	for b := 0; b < n; b++ {
		prev := h
		h = chain(h, tokens[b*c.blockSize:(b+1)*c.blockSize])
		e, ok := c.m[h]
		if !ok {
			if len(run) == 0 {
				runStart = b
				parent = nil
				if b > 0 {
					p := prev
					parent = &p
				}
			}
			run = append(run, h)
			e = c.lru.PushFront(h)
			c.m[h] = e
		} else {
			flush()
		}
		out = append(out, e)
	}
	flush()
	c.touch(out)
}

// walk follows the hash chain of tokens' first n blocks and makes the blocks
// it finds most recently used. It stops at the first block not cached, or
// with create caches it and goes on. It returns the blocks, appended to out.
// c.mu must be held.
func (c *BlockCache) walk(tokens []uint32, n int, salt string, create bool, out []*list.Element) []*list.Element {
	h := saltSeed(salt)
	for b := 0; b < n; b++ {
		h = chain(h, tokens[b*c.blockSize:(b+1)*c.blockSize])
		e, ok := c.m[h]
		if !ok {
			if !create {
				break
			}
			e = c.lru.PushFront(h)
			c.m[h] = e
		}
		out = append(out, e)
	}
	c.touch(out)
	return out
}

// touch makes a chain most recently used, head block last, so that eviction
// takes a chain's tail blocks before its head (vLLM frees blocks in reverse
// order for the same reason: a surviving head still serves shorter prefixes).
func (c *BlockCache) touch(chain []*list.Element) {
	for i := len(chain) - 1; i >= 0; i-- {
		c.lru.MoveToFront(chain[i])
	}
}

// Len is the number of cached blocks.
func (c *BlockCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Reset drops every cached block.
func (c *BlockCache) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.lru.Init()
	if c.events != nil {
		c.events.Cleared()
	}
}

func saltSeed(salt string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(salt); i++ {
		h ^= uint64(salt[i])
		h *= 1099511628211
	}
	return h
}

// chain hashes a block onto its parent's hash (FNV-1a over the token ids, then
// a final avalanche so neighbouring chains spread across the map).
func chain(parent uint64, block []uint32) uint64 {
	h := parent
	for _, t := range block {
		h ^= uint64(t)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
