package policy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

var hashURLs = []string{"http://127.3.0.7:8000", "http://127.3.0.8:8000", "http://127.3.0.9:8000"}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// extractedKey runs one consistent_hash pick and returns the key it logged.
func extractedKey(t *testing.T, req Request) string {
	t.Helper()
	var sink logSink
	p := mustNew(t, FlavorVR, ConsistentHash, DefaultConfig(), sink.opt())
	p.Select(workers(hashURLs...), req)
	for _, m := range sink.messages() {
		if k, ok := strings.CutPrefix(m, "CONSISTENT_HASH_DEBUG: Extracted hash key: "); ok {
			return k
		}
	}
	t.Fatalf("no key logged: %q", sink.messages())
	return ""
}

func TestConsistentHashSameKeySameWorker(t *testing.T) {
	p := mustNew(t, FlavorVR, ConsistentHash, DefaultConfig())
	ws := workers(hashURLs...)
	for s := 0; s < 20; s++ {
		h := hdr("X-Session-Id", fmt.Sprintf("session-%d", s))
		first := p.Select(ws, Request{Headers: h}).Index
		for i := 0; i < 5; i++ {
			if d := p.Select(ws, Request{Headers: h, Text: fmt.Sprint(i)}); d.Index != first || !d.Record {
				t.Fatalf("session %d moved from %d to %d", s, first, d.Index)
			}
		}
	}
}

func TestConsistentHashKnownPicksThroughSelect(t *testing.T) {
	p := mustNew(t, FlavorVR, ConsistentHash, DefaultConfig())
	ws := workers(hashURLs...)
	cases := map[string]int{"alice": 0, "bob": 2}
	for session, want := range cases {
		if d := p.Select(ws, Request{Headers: hdr("x-session-id", session)}); d.Index != want {
			t.Errorf("session %s -> %d, want %d (fbi_hash ring)", session, d.Index, want)
		}
	}
	if d := p.Select(ws, Request{Headers: hdr("X-User-Id", "carol")}); d.Index != 1 {
		t.Errorf("user carol -> %d, want 1", d.Index)
	}
}

func TestConsistentHashHeaderPriority(t *testing.T) {
	cases := []struct {
		h    http.Header
		want string
	}{
		{hdr("X-Request-Id", "r1", "X-Session-Id", "s1"), "header:x-session-id:s1"},
		{hdr("X-Session-Id", "", "X-User-Id", "u1"), "header:x-user-id:u1"},
		{hdr("X-Trace-Id", "t1", "X-Tenant-Id", "n1"), "header:x-tenant-id:n1"},
		{hdr("X-Request-Id", "r1", "X-Correlation-Id", "c1"), "header:x-correlation-id:c1"},
		{hdr("X-Trace-Id", "t1", "X-Request-Id", "r1"), "header:x-request-id:r1"},
		{hdr("X-Trace-Id", "t1"), "header:x-trace-id:t1"},
		// A repeated header: the last value wins (collected into a map).
		{hdr("X-Session-Id", "first", "X-Session-Id", "second"), "header:x-session-id:second"},
		// Non-visible-ASCII values are skipped.
		{hdr("X-Session-Id", "caf\u00e9", "X-User-Id", "u2"), "header:x-user-id:u2"},
		{hdr("X-Other", "v"), "request:prompt"},
	}
	for _, c := range cases {
		if got := extractedKey(t, Request{Text: "prompt", Headers: c.h}); got != c.want {
			t.Errorf("headers %v: key %q, want %q", c.h, got, c.want)
		}
	}
}

func TestConsistentHashKeyFromText(t *testing.T) {
	long := strings.Repeat("x", 200)
	cases := []struct{ text, want string }{
		{"", "request:"},
		{"Tell me a story", "request:Tell me a story"},
		{long, "request_hash:626e7a2eaad58322"},
		{strings.Repeat("y", 100), "request:" + strings.Repeat("y", 100)}, // > 100 bytes only
		// The source scans the text as loose JSON, so prompts can yield ids.
		{"dear user: bob, hello", "user:bob"},
		{`{"session_params": {"session_id": "s9"}, "user": "u"}`, "session:s9"},
		{`{"session_id": 'abc'}`, "session:abc"},
		{`{"user_id": 42}`, "user:42"},
	}
	for _, c := range cases {
		if got := extractedKey(t, Request{Text: c.text}); got != c.want {
			t.Errorf("text %.30q: key %q, want %q", c.text, got, c.want)
		}
	}
}

func TestConsistentHashNoHeaderChatGoesToOneWorker(t *testing.T) {
	p := mustNew(t, FlavorVR, ConsistentHash, DefaultConfig())
	ws := workers(hashURLs...)
	for i := 0; i < 100; i++ {
		// VR chat routes on "" and the generated request id is not a header.
		if d := p.Select(ws, Request{Text: ""}); d.Index != 1 {
			t.Fatalf("request %d went to %d; key \"request:\" maps to worker 1", i, d.Index)
		}
	}
}

func TestConsistentHashUnhealthyTargetFallsBackToFirstHealthy(t *testing.T) {
	p := mustNew(t, FlavorVR, ConsistentHash, DefaultConfig())
	ws := workers(hashURLs...)
	fw(ws[2]).healthy.Store(false) // "bob" maps to worker 2
	fw(ws[0]).healthy.Store(false)
	if d := p.Select(ws, Request{Headers: hdr("x-session-id", "bob")}); d.Index != 1 || !d.Record {
		t.Fatalf("picked %+v, want first healthy (1)", d)
	}
}

func TestConsistentHashRingRebuiltOnMembershipChange(t *testing.T) {
	var sink logSink
	p := mustNew(t, FlavorVR, ConsistentHash, DefaultConfig(), sink.opt())
	ws := workers(hashURLs...)
	p.Select(ws, Request{})
	p.Select(ws, Request{})
	if n := sink.count("Updated consistent hash ring with 3 workers and 480 virtual nodes"); n != 1 {
		t.Fatalf("ring built %d times for an unchanged list", n)
	}
	// Health does not change membership; the list does.
	fw(ws[0]).healthy.Store(false)
	p.Select(ws, Request{})
	if n := sink.count("Updated consistent hash ring"); n != 1 {
		t.Fatalf("ring rebuilt on a health change")
	}
	smaller := ws[1:]
	p.Select(smaller, Request{Headers: hdr("x-session-id", "alice")})
	if n := sink.count("Updated consistent hash ring with 2 workers and 320 virtual nodes"); n != 1 {
		t.Fatalf("ring not rebuilt for a new list: %q", sink.messages())
	}
	if sink.count("Consistent hash routing: key='header:x-session-id:alice' -> worker='http://127.3.0.") != 1 {
		t.Fatalf("routing line missing: %q", sink.messages())
	}
}

func TestConsistentHashDPAwareWorkersMatchByBaseURL(t *testing.T) {
	p := mustNew(t, FlavorVR, ConsistentHash, DefaultConfig())
	// Ring built from plain URLs, candidates carrying a DP rank match by base.
	ring := (&consistentHash{base: base{cfg: DefaultConfig()}}).ringFor(workers(hashURLs...))
	target, _ := lookupRing(ring, "header:x-session-id:alice")
	if b, dp := dpInfo("http://a:1@3"); b != "http://a:1" || !dp {
		t.Fatalf("dpInfo = %q %v", b, dp)
	}
	if _, dp := dpInfo("http://a:1@x"); dp {
		t.Fatal("non-numeric rank accepted")
	}
	if target != hashURLs[0] {
		t.Fatalf("target %s", target)
	}
	if d := p.Select(workers(hashURLs...), Request{Headers: hdr("x-session-id", "alice")}); d.Index != 0 {
		t.Fatalf("picked %d", d.Index)
	}
}

func TestRendezvousTiesTakeLast(t *testing.T) {
	p := mustNew(t, FlavorVR, RendezvousHash, DefaultConfig())
	// Two candidates with the same URL score the same: max_by_key keeps the last.
	ws := workers("http://same:1", "http://same:1")
	for i := 0; i < 10; i++ {
		if d := p.Select(ws, Request{Headers: hdr("x-session-id", fmt.Sprint(i))}); d.Index != 1 {
			t.Fatalf("tie went to %d, want the last (1)", d.Index)
		}
	}
}

func TestRendezvousKnownPicksAndHealth(t *testing.T) {
	var sink logSink
	p := mustNew(t, FlavorVR, RendezvousHash, DefaultConfig(), sink.opt())
	ws := workers(hashURLs...)
	cases := []struct {
		req  Request
		want int
	}{
		{Request{}, 1},
		{Request{Headers: hdr("x-session-id", "alice")}, 2},
		{Request{Headers: hdr("x-session-id", "bob")}, 1},
		{Request{Text: "dear user: dave"}, 0},
	}
	for _, c := range cases {
		if d := p.Select(ws, c.req); d.Index != c.want || !d.Record {
			t.Errorf("%+v -> %+v, want %d", c.req, d, c.want)
		}
	}
	if sink.count("Rendezvous hash routing: key='header:x-session-id:alice' -> worker='http://127.3.0.9:8000' (index=2)") != 1 {
		t.Fatalf("logs %q", sink.messages())
	}
	// Removing the winner moves only its keys.
	fw(ws[2]).healthy.Store(false)
	if d := p.Select(ws, Request{Headers: hdr("x-session-id", "bob")}); d.Index != 1 {
		t.Fatalf("bob moved to %d", d.Index)
	}
	if d := p.Select(ws, Request{Headers: hdr("x-session-id", "alice")}); d.Index == 2 {
		t.Fatal("unhealthy worker picked")
	}
}
