package epp_test

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// BenchmarkEnvoyEPPChat measures requests per second through the Envoy
// proxy and the EPP (scheduling with the operator's SGLang server profile,
// approximate prefix producer, metrics, access log) to two loopback fake
// engines, with 64 concurrent clients. go test -bench EnvoyEPP -benchtime 5s
func BenchmarkEnvoyEPPChat(b *testing.B) {
	r := startRouter(b, podOpts{config: "sglang-server.yaml", kinds: []string{"server", "server"}})
	r.waitStarted()
	body := []byte(chat(sharedPrefix+"benchmark question?", false))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: 30 * time.Second}
	url := r.url("/v1/chat/completions")
	// RunParallel runs parallelism × GOMAXPROCS goroutines: 64 clients.
	b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			var sink [512]byte
			for {
				if _, err := resp.Body.Read(sink[:]); err != nil {
					break
				}
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
