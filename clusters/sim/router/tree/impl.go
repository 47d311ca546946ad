package tree

import (
	"container/heap"
	"sort"
	"sync"
)

// emptyTenant is what the source's prefix match returns when the node it
// stops at holds no tenant at all (only possible for the root of an empty
// tree): the literal string "empty".
const emptyTenant = "empty"

// node is one edge label plus the tenants whose text passed through it.
type node struct {
	children map[rune]*node
	text     []rune
	// tenants maps tenant -> last access epoch (LRU order for eviction).
	// Intermediate nodes get 0 when a tenant first passes through them, as
	// in the source.
	tenants map[string]uint64
	parent  *node
	// lastTenant caches the candidate tenant for prefix matches that stop
	// here: set when the node is created (the inserting tenant) or split
	// (copied from the node split), refreshed only when it goes stale.
	lastTenant    string
	hasLastTenant bool
}

func newNode(text []rune, parent *node) *node {
	return &node{children: map[rune]*node{}, text: text, tenants: map[string]uint64{}, parent: parent}
}

// impl is the tree proper. One mutex guards everything: the source locks per
// node, which allows interleavings a global lock never produces, but every
// outcome of the global lock is one the source can also produce.
type impl struct {
	mu        sync.Mutex
	root      *node
	charCount map[string]int
	// epoch is the LRU clock. The source uses one process-wide counter for
	// all trees; a per-tree counter keeps the same relative order within a
	// tree, which is all eviction compares, and keeps tests deterministic.
	epoch uint64
}

func newImpl() *impl {
	return &impl{root: newNode(nil, nil), charCount: map[string]int{}}
}

func (t *impl) nextEpoch() uint64 {
	e := t.epoch
	t.epoch++
	return e
}

// sharedPrefix counts equal leading characters.
func sharedPrefix(a, b []rune) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func (t *impl) insert(text, tenant string) {
	rs := []rune(text)
	t.mu.Lock()
	defer t.mu.Unlock()

	// Register the tenant at the root without stamping it: the root is
	// never evicted.
	if _, ok := t.root.tenants[tenant]; !ok {
		t.root.tenants[tenant] = 0
	}
	if _, ok := t.charCount[tenant]; !ok {
		t.charCount[tenant] = 0
	}

	prev := t.root
	remaining := rs
	for len(remaining) > 0 {
		first := remaining[0]
		child, ok := prev.children[first]
		if !ok {
			// New leaf holding the rest of the text; stamped, and done.
			leaf := newNode(append([]rune(nil), remaining...), prev)
			leaf.lastTenant, leaf.hasLastTenant = tenant, true
			leaf.tenants[tenant] = t.nextEpoch()
			t.charCount[tenant] += len(remaining)
			prev.children[first] = leaf
			return
		}
		shared := sharedPrefix(remaining, child.text)
		if shared < len(child.text) {
			// Split child at the divergence: the new upper node keeps the
			// child's tenants (with their stamps) and its cached tenant.
			upper := newNode(append([]rune(nil), child.text[:shared]...), prev)
			for k, v := range child.tenants {
				upper.tenants[k] = v
			}
			upper.lastTenant, upper.hasLastTenant = child.lastTenant, child.hasLastTenant
			child.text = append([]rune(nil), child.text[shared:]...)
			child.parent = upper
			upper.children[child.text[0]] = child
			prev.children[first] = upper
			if _, ok := upper.tenants[tenant]; !ok {
				t.charCount[tenant] += shared
				upper.tenants[tenant] = 0
			}
			prev = upper
		} else {
			if _, ok := child.tenants[tenant]; !ok {
				t.charCount[tenant] += len(child.text)
				child.tenants[tenant] = 0
			}
			prev = child
		}
		remaining = remaining[shared:]
	}
	// The text ended on a node boundary: stamp that node.
	prev.tenants[tenant] = t.nextEpoch()
}

// walk follows text from the root over the union of all tenants. It returns
// the matched character count and the node the match stopped in (the
// partially matched node when the text diverges inside one).
func (t *impl) walk(rs []rune, onlyTenant string, restrict bool) (int, *node) {
	matched := 0
	curr := t.root
	remaining := rs
	for len(remaining) > 0 {
		child, ok := curr.children[remaining[0]]
		if !ok {
			break
		}
		if restrict {
			if _, ok := child.tenants[onlyTenant]; !ok {
				break
			}
		}
		shared := sharedPrefix(remaining, child.text)
		matched += shared
		curr = child
		if shared < len(child.text) {
			break
		}
		remaining = remaining[shared:]
	}
	return matched, curr
}

// anyTenant stands in for the source's "first entry of a DashMap", whose
// order is a hash order: the smallest tenant name, so runs are repeatable.
func anyTenant(n *node) string {
	best, found := "", false
	for k := range n.tenants {
		if !found || k < best {
			best, found = k, true
		}
	}
	if !found {
		return emptyTenant
	}
	return best
}

func (t *impl) prefixMatch(text string) (int, string) {
	rs := []rune(text)
	t.mu.Lock()
	defer t.mu.Unlock()
	matched, curr := t.walk(rs, "", false)

	var tenant string
	if _, ok := curr.tenants[curr.lastTenant]; curr.hasLastTenant && ok {
		tenant = curr.lastTenant
	} else {
		tenant = anyTenant(curr)
		curr.lastTenant, curr.hasLastTenant = tenant, true
	}
	// The source refreshes the stamp on only 1 match in 8 to cut contention.
	if e := t.nextEpoch(); e&0x7 == 0 {
		curr.tenants[tenant] = e
	}
	return matched, tenant
}

func (t *impl) prefixMatchTenant(text, tenant string) int {
	rs := []rune(text)
	t.mu.Lock()
	defer t.mu.Unlock()
	matched, curr := t.walk(rs, tenant, true)
	if _, ok := curr.tenants[tenant]; ok {
		curr.tenants[tenant] = t.nextEpoch()
	}
	return matched
}

// hasChildWith reports whether any child of n holds tenant.
func hasChildWith(n *node, tenant string) bool {
	for _, c := range n.children {
		if _, ok := c.tenants[tenant]; ok {
			return true
		}
	}
	return false
}

// dropTenantAt removes tenant from n, unlinks n if nothing is left in it, and
// reports n's parent if the parent has just become a leaf for tenant.
func dropTenantAt(n *node, tenant string) (newLeaf *node) {
	delete(n.tenants, tenant)
	p := n.parent
	if p == nil {
		return nil
	}
	if len(n.children) == 0 && len(n.tenants) == 0 && len(n.text) > 0 {
		if p.children[n.text[0]] == n {
			delete(p.children, n.text[0])
		}
	}
	if _, ok := p.tenants[tenant]; ok && !hasChildWith(p, tenant) {
		return p
	}
	return nil
}

func (t *impl) removeTenant(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var queue []*node
	stack := []*node{t.root}
	for len(stack) > 0 {
		curr := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range curr.children {
			stack = append(stack, c)
		}
		if _, ok := curr.tenants[tenant]; ok && !hasChildWith(curr, tenant) {
			queue = append(queue, curr)
		}
	}
	for len(queue) > 0 {
		curr := queue[0]
		queue = queue[1:]
		if p := dropTenantAt(curr, tenant); p != nil {
			queue = append(queue, p)
		}
	}
	delete(t.charCount, tenant)
}

func (t *impl) tenantCharCount(tenant string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.charCount[tenant]
}

func (t *impl) tenantCharCounts() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.charCount))
	for k, v := range t.charCount {
		out[k] = v
	}
	return out
}

func (t *impl) tenants() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.charCount))
	for k := range t.charCount {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// evictionEntry is one (tenant, leaf) pair in LRU order.
type evictionEntry struct {
	stamp  uint64
	seq    int // push order, so equal stamps pop in a repeatable order
	tenant string
	node   *node
}

type evictionHeap []evictionEntry

func (h evictionHeap) Len() int { return len(h) }
func (h evictionHeap) Less(i, j int) bool {
	if h[i].stamp != h[j].stamp {
		return h[i].stamp < h[j].stamp
	}
	return h[i].seq < h[j].seq
}
func (h evictionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evictionHeap) Push(x any)   { *h = append(*h, x.(evictionEntry)) }
func (h *evictionHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (t *impl) evictTenantsBySize(maxSize int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := &evictionHeap{}
	seq := 0
	push := func(n *node, tenant string) {
		heap.Push(h, evictionEntry{stamp: n.tenants[tenant], seq: seq, tenant: tenant, node: n})
		seq++
	}
	stack := []*node{t.root}
	for len(stack) > 0 {
		curr := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range curr.children {
			stack = append(stack, c)
		}
		for _, tenant := range sortedTenants(curr) {
			if !hasChildWith(curr, tenant) {
				push(curr, tenant)
			}
		}
	}
	for h.Len() > 0 {
		e := heap.Pop(h).(evictionEntry)
		if used, ok := t.charCount[e.tenant]; ok && used <= maxSize {
			continue
		}
		// The entry may be out of date: the tenant may have left the node,
		// or a child may hold it again.
		if _, ok := e.node.tenants[e.tenant]; !ok || hasChildWith(e.node, e.tenant) {
			continue
		}
		if c, ok := t.charCount[e.tenant]; ok {
			t.charCount[e.tenant] = max(0, c-len(e.node.text))
		}
		if p := dropTenantAt(e.node, e.tenant); p != nil {
			push(p, e.tenant)
		}
	}
}

func sortedTenants(n *node) []string {
	out := make([]string, 0, len(n.tenants))
	for k := range n.tenants {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
