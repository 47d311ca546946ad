// Command overheadbench measures the traffic driver's own share of the TTFT
// and latency it reports (traffic/overhead): it starts pacedserver in a
// process of its own, runs the driver against it at each concurrency level,
// joins every request's figures with the server's by a request header, and
// prints the overhead per level (the median of the rounds) as a table and as
// key=value lines for bench/overhead.sh:
//
//	overheadbench [-server ./pacedserver] [-levels 1,16,64,256] [-rounds 3] [-json out.json]
//
// Built as a binary (make bench-bin), it runs on another machine without Go.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpustack/routing-conformance/traffic"
	"github.com/gpustack/routing-conformance/traffic/overhead"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout))
}

func run(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("overheadbench", flag.ContinueOnError)
	server := fs.String("server", "", "the pacedserver binary (default: pacedserver beside this one)")
	levelsFlag := fs.String("levels", "1,16,64,256", "concurrency levels, comma-separated")
	rounds := fs.Int("rounds", 3, "rounds of every level; the median of each figure is printed")
	requests := fs.Int("requests", 0, "requests per level (0: max(400, 32 x concurrency))")
	mode := fs.String("mode", string(traffic.ModeStream), "the driver's mode: stream or alternate")
	jsonOut := fs.String("json", "", "also write every round and the medians here as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the rounds here")
	memProfile := fs.String("memprofile", "", "write an allocation profile here after the rounds")
	memRate := fs.Int("memprofilerate", 0, "runtime.MemProfileRate for -memprofile (0: Go's default, 1: every allocation)")
	shape := overhead.DefaultShape
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *memRate > 0 {
		runtime.MemProfileRate = *memRate
	}
	levels, err := parseLevels(*levelsFlag)
	if err != nil || *rounds < 1 {
		fmt.Fprintf(os.Stderr, "overheadbench: -levels must list positive numbers and -rounds be >= 1 (%v)\n", err)
		return 2
	}
	if *server == "" {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "overheadbench:", err)
			return 1
		}
		*server = filepath.Join(filepath.Dir(self), "pacedserver")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	proc, err := overhead.StartProcess(ctx, *server, "-first-token", shape.FirstToken.String(),
		"-chunks", strconv.Itoa(shape.Chunks), "-gap", shape.Gap.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "overheadbench:", err)
		return 1
	}
	defer func() {
		if err := proc.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "overheadbench:", err)
		}
	}()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "overheadbench: -cpuprofile:", err)
			return 2
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	opts := overhead.Options{ServerURL: proc.URL, Shape: shape, Levels: levels, Mode: traffic.Mode(*mode)}
	if *requests > 0 {
		opts.Requests = func(int) int { return *requests }
	}
	var all []overhead.Result
	for r := 1; r <= *rounds; r++ {
		res, err := overhead.Measure(ctx, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "overheadbench:", err)
			return 1
		}
		for _, l := range res.Levels {
			fmt.Fprintf(os.Stderr, "round %d: c=%d TTFT overhead p50 %s p99 %s max %s; latency p50 %s p99 %s max %s; %.0f req/s\n",
				r, l.Concurrency, ms(l.TTFT.P50), ms(l.TTFT.P99), ms(l.TTFT.Max), ms(l.Latency.P50), ms(l.Latency.P99), ms(l.Latency.Max), l.RequestsPerSecond)
		}
		all = append(all, res)
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "overheadbench: -memprofile:", err)
			return 2
		}
	}
	med := overhead.Median(all)
	printTable(out, med, *rounds)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"rounds": all, "median": med}, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "overheadbench: -json:", err)
			return 1
		}
	}
	return 0
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad level %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }

func printTable(w io.Writer, r overhead.Result, rounds int) {
	s := r.Shape
	fmt.Fprintf(w, "driver overhead: the driver's TTFT and latency minus the server's own for the same request (ms)\n")
	fmt.Fprintf(w, "server: its own process, first token after %s, %d more chunks %s apart; driver mode %s; %s; median of %d rounds\n",
		s.FirstToken, s.Chunks, s.Gap, r.Mode, r.Machine, rounds)
	fmt.Fprintf(w, "%11s %8s %9s %9s %9s %9s %9s %9s %9s %9s %5s\n", "concurrency", "requests", "TTFT p50", "TTFT p99", "TTFT max", "lat p50", "lat p99", "lat max", "req/s", "B/req", "GCs")
	for _, l := range r.Levels {
		fmt.Fprintf(w, "%11d %8d %9s %9s %9s %9s %9s %9s %9.0f %9d %5d\n", l.Concurrency, l.Requests,
			ms(l.TTFT.P50), ms(l.TTFT.P99), ms(l.TTFT.Max), ms(l.Latency.P50), ms(l.Latency.P99), ms(l.Latency.Max), l.RequestsPerSecond, l.AllocPerRequest, l.GCCycles)
	}
	for _, l := range r.Levels {
		fmt.Fprintf(w, "overhead_c%d_ttft_ms=%s/%s/%s\n", l.Concurrency, ms(l.TTFT.P50), ms(l.TTFT.P99), ms(l.TTFT.Max))
		fmt.Fprintf(w, "overhead_c%d_latency_ms=%s/%s/%s\n", l.Concurrency, ms(l.Latency.P50), ms(l.Latency.P99), ms(l.Latency.Max))
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
