package sim_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim"
)

// BenchmarkDeployReady measures Deploy → WaitReady for one router and two
// engines (the suite's most common shape), then deletes the deployment.
//
//	go test -run '^$' -bench DeployReady -benchtime 20x ./clusters/sim
func BenchmarkDeployReady(b *testing.B) {
	for _, router := range []string{api.RouterVLLM, api.RouterSGLang, api.RouterLLMD} {
		b.Run(router, func(b *testing.B) {
			c := realCluster(b, sim.Options{})
			ctx := context.Background()
			var total time.Duration
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				d, err := c.Deploy(ctx, md(fmt.Sprintf("bench-%d", i), router, engineOf(router), 2))
				if err != nil {
					b.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				if err := d.WaitReady(wctx, 5*time.Millisecond); err != nil {
					cancel()
					b.Fatal(err)
				}
				cancel()
				total += time.Since(start)
				b.StopTimer()
				if err := d.Delete(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/ready")
		})
	}
}

// BenchmarkRouterThroughput sends non-streaming chat completions through
// the router of a 1 router + 2 engine deployment with 64 concurrent
// clients, and reports requests per second and the process's memory.
//
//	go test -run '^$' -bench RouterThroughput -benchtime 20000x ./clusters/sim
func BenchmarkRouterThroughput(b *testing.B) {
	for _, router := range []string{api.RouterVLLM, api.RouterSGLang, api.RouterLLMD} {
		b.Run(router, func(b *testing.B) {
			// Fast engines: the benchmark measures the sim, not the modelled latency.
			c := realCluster(b, sim.Options{
				Engine: sim.EngineKnobs{TTFT: time.Millisecond, ITL: 100 * time.Microsecond, OutputTokens: 4}})
			d := deployReady(b, c, md("tput", router, engineOf(router), 2))
			base, err := d.OpenAIBaseURL(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			const clients = 64
			tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			body := `{"model":"Qwen/Qwen2.5-0.5B-Instruct","max_tokens":4,` +
				`"messages":[{"role":"user","content":"say something short"}]}`
			var next, failures atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						resp, err := client.Post(base+"/chat/completions", "application/json", strings.NewReader(body))
						if err != nil {
							failures.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							failures.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(ms.Sys)/(1<<20), "MB-sys")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MB-heap")
			if kb := peakRSSKiB(); kb > 0 {
				b.ReportMetric(float64(kb)/1024, "MB-peak-rss")
			}
			if f := failures.Load(); f > 0 {
				b.Fatalf("%d of %d requests failed", f, b.N)
			}
		})
	}
}

// peakRSSKiB is the process's peak resident set (VmHWM), 0 where unknown.
func peakRSSKiB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb
		}
	}
	return 0
}
