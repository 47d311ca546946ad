// Package tree is the approximate radix tree both argv routers' cache_aware
// policy keeps (vllm-router src/tree.rs, sgl-model-gateway tree.rs): edges are
// strings of characters (Unicode scalar values, not bytes and not tokens), one
// tree is shared by all tenants (workers), and every node remembers which
// tenants' text passed through it. See docs/routers.md#cache-aware-policy.
//
// Ported behaviour, including the quirks: the candidate tenant of a match is
// the node's cached creator, not the tenant with the longest match of its own;
// a match refreshes LRU stamps only 1 time in 8; eviction removes each
// over-limit tenant's least recently stamped leaves. Simplifications: one
// mutex instead of per-node locks (every outcome is one the source can
// produce), an LRU clock per tree instead of per process (only the order
// within a tree matters), and the smallest tenant name where the source takes
// the first entry of a hash map.
//
// A Tree is safe for concurrent use.
package tree

// Tree is one model key's shared prefix tree.
type Tree struct{ t *impl }

// New returns an empty tree.
func New() *Tree { return &Tree{t: newImpl()} }

// Insert records that tenant served text: every character of text is
// attributed to tenant along its path. Insert("", tenant) registers the tenant
// at the root (the routers seed each worker that way).
func (t *Tree) Insert(text, tenant string) { t.t.insert(text, tenant) }

// PrefixMatch walks text from the root over the union of all tenants and
// returns how many characters matched and the candidate tenant: the cached
// last tenant of the deepest node reached (normally the first tenant whose
// text created that node). A partial match inside a node counts the shared
// characters and stops there. When the cached tenant has left the node, any
// tenant still holding the node is returned and cached (the source takes the
// first in hash order; this port takes the smallest name, to be repeatable).
// A match that reaches no node stops at the root, whose tenant is any
// registered tenant, or the literal "empty" for a tree without tenants (as
// in the source). One match in eight refreshes the node's LRU stamp for the
// returned tenant, as in the source.
func (t *Tree) PrefixMatch(text string) (matched int, tenant string) { return t.t.prefixMatch(text) }

// PrefixMatchTenant is the match restricted to nodes tenant holds; it
// refreshes the tenant's stamp on the node it stops at.
func (t *Tree) PrefixMatchTenant(text, tenant string) (matched int) {
	return t.t.prefixMatchTenant(text, tenant)
}

// RemoveTenant forgets tenant everywhere.
func (t *Tree) RemoveTenant(tenant string) { t.t.removeTenant(tenant) }

// TenantCharCount is the number of characters attributed to tenant.
func (t *Tree) TenantCharCount(tenant string) int { return t.t.tenantCharCount(tenant) }

// TenantCharCounts returns the character count of every tenant.
func (t *Tree) TenantCharCounts() map[string]int { return t.t.tenantCharCounts() }

// Tenants lists the registered tenants, sorted.
func (t *Tree) Tenants() []string { return t.t.tenants() }

// EvictTenantsBySize evicts, for every tenant holding more than maxSize
// characters, that tenant's least recently used leaves until it fits.
func (t *Tree) EvictTenantsBySize(maxSize int) { t.t.evictTenantsBySize(maxSize) }
