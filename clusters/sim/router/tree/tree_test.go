package tree

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func mustInvariants(t *testing.T, tr *Tree) {
	t.Helper()
	if err := tr.t.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestTreeUnicodeScalarMatching(t *testing.T) {
	tr := New()
	// "é" is one scalar (2 bytes), "你" 3 bytes, "🙂" 4 bytes, and "e\u0301"
	// is two scalars: counts are in scalars, never bytes.
	stored := "héllo 你好 🙂 e\u0301!"
	tr.Insert(stored, "w1")
	if got, want := tr.TenantCharCount("w1"), utf8.RuneCountInString(stored); got != want {
		t.Fatalf("char count = %d, want %d scalars (bytes would be %d)", got, want, len(stored))
	}
	query := "héllo 你好 🙂 e\u0301?"
	matched, tenant := tr.PrefixMatch(query)
	if want := utf8.RuneCountInString("héllo 你好 🙂 e\u0301"); matched != want || tenant != "w1" {
		t.Fatalf("PrefixMatch = (%d, %q), want (%d, w1)", matched, tenant, want)
	}
	// "佣" (E4 BD A3) shares two leading bytes with "你" (E4 BD A0): a match
	// diverging there must not count a partial scalar.
	matched, _ = tr.PrefixMatch("héllo 佣")
	if matched != 6 {
		t.Fatalf("match diverging inside a scalar = %d, want 6", matched)
	}
	mustInvariants(t, tr)
}

func TestTreePartialMatchInsideNode(t *testing.T) {
	tr := New()
	tr.Insert("hello world", "w1")
	matched, tenant := tr.PrefixMatch("hello there")
	if matched != 6 || tenant != "w1" {
		t.Fatalf("PrefixMatch = (%d, %q), want (6, w1): shared characters of a partially matched node count", matched, tenant)
	}
	// The match does not split the node: a later full match still works.
	if matched, _ := tr.PrefixMatch("hello world!"); matched != 11 {
		t.Fatalf("full match after partial = %d, want 11", matched)
	}
	mustInvariants(t, tr)
}

func TestTreeCandidateIsNodeCreatorNotLaterInserter(t *testing.T) {
	tr := New()
	tr.Insert("", "w1")
	tr.Insert("", "w2")
	tr.Insert("the same prompt", "w2")
	tr.Insert("the same prompt", "w1")
	if _, tenant := tr.PrefixMatch("the same prompt"); tenant != "w2" {
		t.Fatalf("tenant = %q, want w2 (created the node)", tenant)
	}
}

func TestTreeSplitKeepsCreatorOfUpperNode(t *testing.T) {
	tr := New()
	tr.Insert("abcxyz", "w1")
	tr.Insert("abcdef", "w2") // splits "abcxyz" into "abc" + "xyz"
	cases := []struct {
		text    string
		matched int
		tenant  string
	}{
		{"abcdef", 6, "w2"}, // leaf "def" was created by w2
		{"abcxyz", 6, "w1"},
		{"abc", 3, "w1"}, // split node inherits w1 from the node it split
		{"abq", 2, "w1"}, // partial inside the split node
	}
	for _, c := range cases {
		m, tn := tr.PrefixMatch(c.text)
		if m != c.matched || tn != c.tenant {
			t.Errorf("PrefixMatch(%q) = (%d, %q), want (%d, %q)", c.text, m, tn, c.matched, c.tenant)
		}
	}
	mustInvariants(t, tr)
}

func TestTreeStaleCandidateFallsBackToRemainingTenant(t *testing.T) {
	tr := New()
	tr.Insert("shared prefix text", "w1")
	tr.Insert("shared prefix text", "w2")
	tr.RemoveTenant("w1")
	if _, tenant := tr.PrefixMatch("shared prefix text"); tenant != "w2" {
		t.Fatalf("tenant = %q, want w2 after the creator left", tenant)
	}
	mustInvariants(t, tr)
}

func TestTreeEmptyTreeMatchesNothing(t *testing.T) {
	tr := New()
	if m, tenant := tr.PrefixMatch("anything"); m != 0 || tenant != "empty" {
		t.Fatalf("PrefixMatch on empty tree = (%d, %q), want (0, \"empty\")", m, tenant)
	}
	// The source stamps the tenant it returned even when that is the
	// placeholder "empty" (1 match in 8; this match is the tree's first), so
	// the placeholder stays a root tenant. A seeded tree never shows it:
	seeded := New()
	seeded.Insert("", "w1")
	if m, tenant := seeded.PrefixMatch(""); m != 0 || tenant != "w1" {
		t.Fatalf("PrefixMatch(\"\") = (%d, %q), want (0, w1)", m, tenant)
	}
}

func TestTreeCharCountsPerTenant(t *testing.T) {
	tr := New()
	tr.Insert("hello", "w1")
	tr.Insert("help", "w2")  // "hel" (3) + "p" (1)
	tr.Insert("hello", "w2") // "lo" (2) more
	got := tr.TenantCharCounts()
	if got["w1"] != 5 || got["w2"] != 6 {
		t.Fatalf("counts = %v, want w1:5 w2:6", got)
	}
	if ts := tr.Tenants(); strings.Join(ts, ",") != "w1,w2" {
		t.Fatalf("Tenants = %v", ts)
	}
	mustInvariants(t, tr)
}

func TestTreeRemoveTenantPrunesOnlyItsNodes(t *testing.T) {
	tr := New()
	tr.Insert("hello world", "w1")
	tr.Insert("hello there", "w2")
	tr.RemoveTenant("w2")
	if _, ok := tr.TenantCharCounts()["w2"]; ok {
		t.Fatal("w2 still counted after RemoveTenant")
	}
	if m, tenant := tr.PrefixMatch("hello there"); m != 6 || tenant != "w1" {
		t.Fatalf("after removal PrefixMatch = (%d, %q), want (6, w1): w2's leaf is gone", m, tenant)
	}
	if m := tr.PrefixMatchTenant("hello world", "w2"); m != 0 {
		t.Fatalf("PrefixMatchTenant for removed tenant = %d, want 0", m)
	}
	mustInvariants(t, tr)
}

func TestTreePrefixMatchTenantOnlyWalksItsNodes(t *testing.T) {
	tr := New()
	tr.Insert("abcdef", "w1")
	tr.Insert("abcxyz", "w2")
	if m := tr.PrefixMatchTenant("abcdef", "w2"); m != 3 {
		t.Fatalf("w2 match = %d, want 3 (\"abc\" only)", m)
	}
	if m := tr.PrefixMatchTenant("abcdef", "w1"); m != 6 {
		t.Fatalf("w1 match = %d, want 6", m)
	}
}

func TestTreeEvictionRemovesLeastRecentlyUsedLeafFirst(t *testing.T) {
	tr := New()
	tr.Insert("apple", "w1")  // leaf stamped first
	tr.Insert("banana", "w1") // stamped later
	tr.EvictTenantsBySize(6)
	if got := tr.TenantCharCount("w1"); got != 6 {
		t.Fatalf("count after eviction = %d, want 6", got)
	}
	if m, _ := tr.PrefixMatch("apple"); m != 0 {
		t.Fatalf("apple still matches %d chars; the older leaf should be evicted", m)
	}
	if m, _ := tr.PrefixMatch("banana"); m != 6 {
		t.Fatalf("banana matches %d, want 6", m)
	}
	mustInvariants(t, tr)
}

func TestTreeEvictionOnlyTouchesTenantsOverLimit(t *testing.T) {
	tr := New()
	tr.Insert("a long text for w1", "w1")
	tr.Insert("short", "w2")
	tr.EvictTenantsBySize(5)
	counts := tr.TenantCharCounts()
	if counts["w2"] != 5 {
		t.Fatalf("w2 at the limit was evicted: %v", counts)
	}
	if counts["w1"] != 0 {
		t.Fatalf("w1 over the limit kept %d chars, want 0 (its only leaf goes)", counts["w1"])
	}
	mustInvariants(t, tr)
}

func TestTreeEvictionKeepsSharedPrefixForOtherTenants(t *testing.T) {
	tr := New()
	tr.Insert("common prefix / w1 tail", "w1")
	tr.Insert("common prefix / w2 tail", "w2")
	tr.EvictTenantsBySize(0)
	if m := tr.PrefixMatchTenant("common prefix / w2 tail", "w2"); m != 0 {
		t.Fatalf("w2 still matches %d after eviction to 0", m)
	}
	counts := tr.TenantCharCounts()
	if counts["w1"] != 0 || counts["w2"] != 0 {
		t.Fatalf("counts after eviction to 0 = %v", counts)
	}
	mustInvariants(t, tr)

	tr2 := New()
	tr2.Insert("common prefix / w1 tail", "w1")
	tr2.Insert("common prefix / w2", "w2") // 18 chars: at the limit
	tr2.EvictTenantsBySize(18)             // w1 (23) loses its tail, keeps the shared 17
	if m := tr2.PrefixMatchTenant("common prefix / w1 tail", "w1"); m != 17 {
		t.Fatalf("w1 match after partial eviction = %d, want 17", m)
	}
	if m := tr2.PrefixMatchTenant("common prefix / w2 tail", "w2"); m != 18 {
		t.Fatalf("w2 match = %d, want 18 (untouched)", m)
	}
	mustInvariants(t, tr2)
}

func TestTreeAccessStampUpdatedOneMatchInEight(t *testing.T) {
	build := func() *Tree {
		tr := New()
		tr.Insert("apple", "w1")  // epoch 0
		tr.Insert("banana", "w1") // epoch 1
		return tr
	}
	// A match at a clock value that is not a multiple of 8 leaves the stamp:
	// apple stays the least recently used.
	tr := build()
	tr.PrefixMatch("apple") // epoch 2
	tr.EvictTenantsBySize(6)
	if m, _ := tr.PrefixMatch("apple"); m != 0 {
		t.Fatal("a match at epoch 2 refreshed apple's stamp; the source refreshes 1 match in 8")
	}
	// At epoch 8 the match refreshes it, so banana is evicted instead.
	tr = build()
	for i := 0; i < 6; i++ {
		tr.PrefixMatch("zzz") // epochs 2..7
	}
	tr.PrefixMatch("apple") // epoch 8
	tr.EvictTenantsBySize(6)
	if m, _ := tr.PrefixMatch("banana"); m != 0 {
		t.Fatal("banana survived; apple's stamp should have been refreshed at epoch 8")
	}
	if m, _ := tr.PrefixMatch("apple"); m != 5 {
		t.Fatal("apple was evicted despite its refreshed stamp")
	}
}

func TestTreeConcurrentUse(t *testing.T) {
	tr := New()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			tenant := fmt.Sprintf("w%d", g%3)
			for i := 0; i < 200; i++ {
				text := fmt.Sprintf("prefix %d %d", i%7, g)
				tr.Insert(text, tenant)
				tr.PrefixMatch(text)
				tr.PrefixMatchTenant(text, tenant)
				if i%50 == 0 {
					tr.EvictTenantsBySize(30)
				}
				if i%97 == 0 {
					tr.RemoveTenant(tenant)
				}
				tr.TenantCharCounts()
			}
		}(g)
	}
	wg.Wait()
	mustInvariants(t, tr)
}

// FuzzTree runs a byte-coded sequence of operations and checks that nothing
// panics and the invariants hold after every step.
func FuzzTree(f *testing.F) {
	f.Add([]byte("\x00hello\x01\x01help\x02\x02he\x03\x00"))
	f.Add([]byte("\x00h\xc3\xa9llo\x00\x01h\xc3\xa9\x04\x05"))
	f.Add([]byte{0, 'a', 1, 'b', 2, 'a', 'b', 3, 4, 0})
	tenants := []string{"w1", "w2", "w3"}
	f.Fuzz(func(t *testing.T, ops []byte) {
		tr := New()
		for len(ops) > 0 {
			op := ops[0] % 6
			ops = ops[1:]
			// Operand: bytes up to the next byte < 6 (may be invalid UTF-8).
			end := 0
			for end < len(ops) && ops[end] >= 6 {
				end++
			}
			text := string(ops[:end])
			ops = ops[end:]
			tenant := tenants[len(text)%len(tenants)]
			switch op {
			case 0, 1:
				tr.Insert(text, tenant)
			case 2:
				m, got := tr.PrefixMatch(text)
				if m < 0 || m > utf8.RuneCountInString(text) {
					t.Fatalf("PrefixMatch(%q) matched %d of %d", text, m, utf8.RuneCountInString(text))
				}
				if got == "" {
					t.Fatalf("PrefixMatch(%q) returned no tenant", text)
				}
			case 3:
				if m := tr.PrefixMatchTenant(text, tenant); m < 0 || m > utf8.RuneCountInString(text) {
					t.Fatalf("PrefixMatchTenant matched %d", m)
				}
			case 4:
				tr.EvictTenantsBySize(len(text))
				for tn, c := range tr.TenantCharCounts() {
					if c > len(text) {
						t.Fatalf("after eviction to %d, %s holds %d", len(text), tn, c)
					}
				}
			case 5:
				tr.RemoveTenant(tenant)
			}
			if err := tr.t.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
