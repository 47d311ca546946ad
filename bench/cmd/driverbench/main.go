// Command driverbench runs the traffic driver once against an OpenAI base URL
// and prints its throughput and memory as key=value lines for
// bench/driver-vs-peer.sh:
//
//	driver_requests=20000
//	driver_ok=20000
//	driver_wall_s=3.2
//	driver_rps=6250.0
//	driver_latency_p50_ms=... driver_latency_p99_ms=...
//	driver_peak_rss_mb=...   (getrusage maxrss: the whole process, results included)
//	driver_peak_heap_mb=...  (live heap objects, sampled every 10ms)
//	driver_total_alloc_mb=...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/gpustack/routing-conformance/traffic"
)

func main() {
	os.Exit(run())
}

func run() int {
	url := flag.String("url", "", "OpenAI base URL, e.g. http://127.0.0.1:8000/v1 (required)")
	n := flag.Int("n", 20000, "number of requests")
	c := flag.Int("c", 64, "concurrency")
	mode := flag.String("mode", string(traffic.ModeNonStream), "non-stream, stream or alternate")
	model := flag.String("model", "bench", "model name")
	maxTokens := flag.Int("max-tokens", 16, "max_tokens (0: omit)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run here")
	flag.Parse()

	plan := traffic.Plan{
		BaseURL:     *url,
		Model:       *model,
		Requests:    *n,
		Concurrency: *c,
		Mode:        traffic.Mode(*mode),
		MaxTokens:   *maxTokens,
	}
	if err := plan.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "driverbench: %v (set it with the matching flag)\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "driverbench: -cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "driverbench: -cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}

	sampler := startHeapSampler(10 * time.Millisecond)
	rep, err := traffic.Run(ctx, plan)
	peakHeap, totalAlloc := sampler.stop()
	if err != nil && rep == nil {
		fmt.Fprintf(os.Stderr, "driverbench: %v\n", err)
		return 1
	}
	s := rep.Summary
	fmt.Printf("driver_requests=%d\n", s.Requests)
	fmt.Printf("driver_ok=%d\n", s.OK)
	fmt.Printf("driver_failed=%d\n", s.Failed)
	fmt.Printf("driver_wall_s=%.3f\n", s.Wall.Seconds())
	fmt.Printf("driver_rps=%.1f\n", s.RequestsPerSecond)
	fmt.Printf("driver_latency_p50_ms=%.3f\n", ms(s.Latency.P50))
	fmt.Printf("driver_latency_p99_ms=%.3f\n", ms(s.Latency.P99))
	fmt.Printf("driver_peak_rss_mb=%.1f\n", peakRSSMB())
	fmt.Printf("driver_peak_heap_mb=%.1f\n", float64(peakHeap)/(1<<20))
	fmt.Printf("driver_total_alloc_mb=%.1f\n", float64(totalAlloc)/(1<<20))
	if err != nil {
		fmt.Fprintf(os.Stderr, "driverbench: %v\n", err)
		return 1
	}
	if s.OK != s.Requests {
		fmt.Fprintf(os.Stderr, "driverbench: %d of %d requests failed: %v\n", s.Requests-s.OK, s.Requests, s.ByClass)
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// peakRSSMB is the process's maximum resident set size (Linux reports KiB).
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Maxrss) / 1024
}

// heapSampler tracks the peak of live heap objects; runtime/metrics reads
// do not stop the world, unlike ReadMemStats.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/allocs:bytes"}

func readHeap() (live, total uint64) {
	samples := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	if samples[0].Value.Kind() == metrics.KindUint64 {
		live = samples[0].Value.Uint64()
	}
	if samples[1].Value.Kind() == metrics.KindUint64 {
		total = samples[1].Value.Uint64()
	}
	return live, total
}

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{done: make(chan struct{})}
	h.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			live, _ := readHeap()
			h.peak = max(h.peak, live)
			select {
			case <-h.done:
				return
			case <-t.C:
			}
		}
	})
	return h
}

// stop ends sampling and returns the peak live heap and total bytes allocated.
func (h *heapSampler) stop() (peak, totalAlloc uint64) {
	close(h.done)
	h.wg.Wait()
	live, total := readHeap()
	return max(h.peak, live), total
}
