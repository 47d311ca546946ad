package policy

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCacheAwareSelect measures one cache_aware pick (match + insert)
// with 500-character texts sharing a 400-character prefix, at 2 and 8 workers.
func BenchmarkCacheAwareSelect(b *testing.B) {
	prefix := strings.Repeat("You are a helpful assistant. ", 14)[:400]
	texts := make([]string, 256)
	for i := range texts {
		texts[i] = prefix + fmt.Sprintf("%0100d", i*7919)
	}
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			urls := make([]string, n)
			for i := range urls {
				urls[i] = fmt.Sprintf("http://127.3.0.%d:8000", i+1)
			}
			p := mustNew(b, FlavorSG, CacheAware, DefaultConfig())
			ws := workers(urls...)
			addAll(p, ws, "m")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p.Select(ws, Request{Text: texts[i%len(texts)], Model: "m"})
				i++
			}
		})
	}
}

// BenchmarkFbiHash measures the VR consistent-hash key hash.
func BenchmarkFbiHash(b *testing.B) {
	for b.Loop() {
		fbiHash("header:x-session-id:0123456789abcdef")
	}
}
