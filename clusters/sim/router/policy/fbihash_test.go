package policy

import (
	"fmt"
	"strings"
	"testing"
)

// Vectors produced by compiling vllm-router's own consistent_hash.rs hash
// functions (commit e667ebb) with rustc and printing fbi_hash / furc_hash.
func TestConsistentHashKnownVectors(t *testing.T) {
	cases := []struct {
		key  string
		furc uint32
		fbi  uint64
	}{
		{"", 6173600, 0xc0663e029346e424},
		{"a", 7695180, 0x29d1ab12ec5fea11},
		{"hello", 4189030, 0xcf31517d75d7ac16},
		{"test_session_123", 2200169, 0xbcc9b06b6bade78a},
		{"http://worker1:8000:0", 7552980, 0x0313aad40b6c33c4},
		{"http://127.3.0.7:8000:159", 1080661, 0x0bb64642cd830418},
		{"request:", 2268526, 0x13b2f1ae12a8b5ab},
		{"header:x-session-id:abc", 1770962, 0x543d9eea8d6f5317},
		{"12345678", 455460, 0x6c5f6dd21845cee9},
		{"1234567", 1505524, 0x2291481078afd3df},
		{"ü日本", 2556415, 0xa811244e23cc7343},
		{strings.Repeat("x", 200), 0, 0x626e7a2eaad58322},
	}
	for _, c := range cases {
		if c.furc != 0 {
			if got := furcHash([]byte(c.key), fbiModulus); got != c.furc {
				t.Errorf("furc_hash(%q) = %d, want %d", c.key, got, c.furc)
			}
		}
		if got := fbiHash(c.key); got != c.fbi {
			t.Errorf("fbi_hash(%q) = %016x, want %016x", c.key, got, c.fbi)
		}
	}
	if got := murmurHash64A([]byte("hello"), 0); got != 0x1e68d17c457bf117 {
		t.Errorf("MurmurHash64A(hello, 0) = %016x", got)
	}
	if got := murmurHash64A(nil, 0); got != 0 {
		t.Errorf("MurmurHash64A(\"\", 0) = %016x, want 0", got)
	}
}

// Picks over three workers, computed with the source's ring (BTreeMap of
// fbi_hash("<url>:<i>"), i < 160) and rendezvous max_by_key.
func TestConsistentHashAndRendezvousKnownPicks(t *testing.T) {
	urls := []string{"http://127.3.0.7:8000", "http://127.3.0.8:8000", "http://127.3.0.9:8000"}
	cases := []struct{ key, ring, hrw string }{
		{"request:", urls[1], urls[1]},
		{"header:x-session-id:alice", urls[0], urls[2]},
		{"header:x-session-id:bob", urls[2], urls[1]},
		{"header:x-user-id:carol", urls[1], urls[2]},
		{"request:hello", urls[2], urls[1]},
		{"user:dave", urls[2], urls[0]},
	}
	ch := &consistentHash{base: base{cfg: DefaultConfig()}}
	ws := workers(urls...)
	ring := ch.ringFor(ws)
	if len(ring) != 480 {
		t.Fatalf("ring has %d entries, want 480 (3 x 160, no collisions)", len(ring))
	}
	for _, c := range cases {
		if got, _ := lookupRing(ring, c.key); got != c.ring {
			t.Errorf("ring(%q) = %s, want %s", c.key, got, c.ring)
		}
		best, score := "", uint64(0)
		for _, u := range urls {
			if s := fbiHash(fmt.Sprintf("%s:%s", c.key, u)); best == "" || s >= score {
				best, score = u, s
			}
		}
		if best != c.hrw {
			t.Errorf("rendezvous(%q) = %s, want %s", c.key, best, c.hrw)
		}
	}
}
