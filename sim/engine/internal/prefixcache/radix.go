package prefixcache

import (
	"slices"
	"sync"
)

// RadixCache is SGLang's RadixAttention cache: a radix tree over token ids.
// A lookup returns the longest cached prefix, capped at N-1 tokens and
// rounded down to a whole number of pages. When more than Capacity tokens are
// cached, least-recently-used leaves are evicted.
type RadixCache struct {
	pageSize int
	capacity int

	mu    sync.Mutex
	root  *radixNode
	size  int // cached tokens (sum of edge lengths)
	clock uint64
}

type radixNode struct {
	key      []uint32
	parent   *radixNode
	children map[uint32]*radixNode
	last     uint64
}

// NewRadixCache returns a tree matching at pageSize granularity (SGLang's
// --page-size, 1 by default) that holds at most capacityTokens tokens.
func NewRadixCache(pageSize, capacityTokens int) *RadixCache {
	if pageSize < 1 {
		pageSize = 1
	}
	if capacityTokens < 1 {
		capacityTokens = 1
	}
	return &RadixCache{pageSize: pageSize, capacity: capacityTokens, root: &radixNode{children: map[uint32]*radixNode{}}}
}

// PageSize is the match granularity in tokens.
func (c *RadixCache) PageSize() int { return c.pageSize }

// Match returns the cached prefix length of prompt: min(shared, N-1) rounded
// down to the page size (SGLang's adjust_max_prefix_ids keeps the last token
// for the forward pass). The matched path becomes most recently used.
func (c *RadixCache) Match(prompt []uint32) int {
	key := prompt[:max(len(prompt)-1, 0)]
	key = key[:len(key)/c.pageSize*c.pageSize]
	if len(key) == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	n := c.root
	matched := 0
	for matched < len(key) {
		child, ok := n.children[key[matched]]
		if !ok {
			break
		}
		k := commonPrefix(child.key, key[matched:])
		child.last = c.clock
		matched += k
		if k < len(child.key) {
			break
		}
		n = child
	}
	return matched / c.pageSize * c.pageSize
}

// Insert caches tokens (a whole number of pages of them, as SGLang inserts
// page-aligned keys) and evicts least-recently-used leaves beyond capacity.
func (c *RadixCache) Insert(tokens []uint32) {
	key := tokens[:len(tokens)/c.pageSize*c.pageSize]
	if len(key) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	n := c.root
	for len(key) > 0 {
		child, ok := n.children[key[0]]
		if !ok {
			leaf := &radixNode{key: slices.Clone(key), parent: n, last: c.clock}
			if n.children == nil {
				n.children = make(map[uint32]*radixNode, 2)
			}
			n.children[key[0]] = leaf
			c.size += len(key)
			break
		}
		child.last = c.clock
		k := commonPrefix(child.key, key)
		if k < len(child.key) {
			child = c.split(child, k)
		}
		key = key[k:]
		n = child
	}
	if c.size > c.capacity {
		c.evict()
	}
}

// split cuts node after k tokens and returns the new upper half.
func (c *RadixCache) split(node *radixNode, k int) *radixNode {
	upper := &radixNode{
		key:      node.key[:k:k],
		parent:   node.parent,
		children: map[uint32]*radixNode{node.key[k]: node},
		last:     node.last,
	}
	node.parent.children[node.key[0]] = upper
	node.key = node.key[k:]
	node.parent = upper
	return upper
}

// evict removes least-recently-used leaves until the tree is at 90% of its
// capacity. Evicting a batch at a time keeps the cost of the leaf scan
// amortized when a busy engine stays at capacity.
func (c *RadixCache) evict() {
	target := c.capacity * 9 / 10
	var leaves []*radixNode
	var collect func(n *radixNode)
	collect = func(n *radixNode) {
		for _, ch := range n.children {
			if len(ch.children) == 0 {
				leaves = append(leaves, ch)
			} else {
				collect(ch)
			}
		}
	}
	for c.size > target {
		leaves = leaves[:0]
		collect(c.root)
		if len(leaves) == 0 {
			return
		}
		slices.SortFunc(leaves, func(a, b *radixNode) int {
			switch {
			case a.last < b.last:
				return -1
			case a.last > b.last:
				return 1
			}
			return 0
		})
		for _, l := range leaves {
			if c.size <= target {
				return
			}
			delete(l.parent.children, l.key[0])
			c.size -= len(l.key)
		}
	}
}

// Size is the number of cached tokens.
func (c *RadixCache) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// Reset drops the whole tree (SGLang's /flush_cache).
func (c *RadixCache) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.root = &radixNode{children: map[uint32]*radixNode{}}
	c.size = 0
}

func commonPrefix(a, b []uint32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
