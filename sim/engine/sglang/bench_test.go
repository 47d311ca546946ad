package sglang

import (
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
)

// BenchmarkNonStreamingChat measures one engine's non-streaming chat
// throughput over loopback HTTP with zero TTFT/ITL (the sim's own cost):
//
//	go test -run x -bench NonStreamingChat -benchtime 20000x ./sim/engine/sglang/
func BenchmarkNonStreamingChat(b *testing.B) {
	e := enginetest.Start(b, Main, []string{"--model-path", model, "--enable-metrics", "--port", "8000"},
		map[string]string{"SIM_ENGINE_TTFT": "0", "SIM_ENGINE_ITL": "0"})
	if err := e.WaitReady(5e9); err != nil {
		b.Fatal(err)
	}
	e.BenchmarkPosts(b, "/v1/chat/completions", enginetest.ChatBody(model, strings.Repeat("A shared system prompt for the benchmark. ", 10)+"and a question", ""))
}
