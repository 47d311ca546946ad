package vllm

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/engine/enginetest"
)

// BenchmarkNonStreamingChat measures one engine's non-streaming chat
// throughput over loopback HTTP with zero TTFT/ITL (the sim's own cost):
//
//	go test -run x -bench NonStreamingChat -benchtime 20000x ./clusters/sim/engine/vllm/
func BenchmarkNonStreamingChat(b *testing.B) {
	e := enginetest.Start(b, Main, []string{"serve", model, "--port", "8000"},
		map[string]string{"SIM_ENGINE_TTFT": "0", "SIM_ENGINE_ITL": "0"})
	if err := e.WaitReady(5e9); err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := chatBody(strings.Repeat("A shared system prompt for the benchmark. ", 10)+"and a question", "")
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(e.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
