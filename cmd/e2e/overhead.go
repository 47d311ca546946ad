package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/internal/suiterun"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
	"github.com/gpustack/routing-conformance/traffic/overhead"
)

// The driver calibration: before the suite starts, the traffic driver runs
// against a paced server in a process of its own (this binary again, as
// "e2e overhead-server") at the concurrency claim's levels, and the overhead
// it adds to every TTFT and latency it reports is written for the report,
// which states it beside each latency table. It runs on the machine and at
// the levels of the run whose figures it bounds, and costs a few seconds.

// claimConcurrency is the claim whose latency tables the calibration bounds.
const claimConcurrency = "concurrency"

// calibrationRequests is how many requests a calibration level sends: a
// p99 below the maximum, and 16 rounds of the level's workers.
func calibrationRequests(c int) int { return max(200, 16*c) }

// calibrate measures the driver's overhead for the run o describes into
// path, and points the suite at it (config.EnvDriverOverhead). A run that
// cannot select the concurrency claim is not calibrated; a calibration that
// fails says why in the file and in one line, and the run goes on. It
// reports false when it was interrupted (Ctrl-C): then nothing should start.
func calibrate(ctx context.Context, o suiterun.Options, path string) bool {
	_ = os.Unsetenv(config.EnvDriverOverhead)
	if !selectsClaim(o.LabelFilter, claimConcurrency) {
		return true
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := measureOverhead(ctx, o)
	if ctx.Err() != nil {
		fmt.Fprintln(o.Out, "e2e: interrupted while measuring the driver's overhead")
		return false
	}
	if d.Measured != nil {
		fmt.Fprintf(o.Out, "e2e: driver overhead on this machine (ms, TTFT / latency, max): %s\n", levelsLine(*d.Measured))
	} else {
		fmt.Fprintf(o.Out, "e2e: driver overhead not measured: %s\n", d.NotMeasured)
	}
	b, _ := json.MarshalIndent(d, "", "  ")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
		if err == nil {
			_ = os.Setenv(config.EnvDriverOverhead, path)
			return true
		}
	}
	fmt.Fprintf(o.Out, "e2e: could not write %s; the report will say the driver overhead was not measured\n", path)
	return true
}

func measureOverhead(ctx context.Context, o suiterun.Options) report.DriverOverhead {
	expect, err := fixtures.Expectations()
	if err != nil {
		return report.DriverOverhead{NotMeasured: "fixtures/expect.yaml did not load: " + strings.SplitN(err.Error(), "\n", 2)[0]}
	}
	cfg, err := config.Load(o.Config, expect.Names()...)
	if err != nil {
		return report.DriverOverhead{NotMeasured: "the suite config did not load: " + strings.SplitN(err.Error(), "\n", 2)[0]}
	}
	self, err := os.Executable()
	if err != nil {
		return report.DriverOverhead{NotMeasured: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	proc, err := overhead.StartProcess(ctx, self, "overhead-server")
	if err != nil {
		return report.DriverOverhead{NotMeasured: err.Error()}
	}
	defer func() { _ = proc.Stop() }()
	res, err := overhead.Measure(ctx, overhead.Options{
		ServerURL: proc.URL, Shape: overhead.DefaultShape, Levels: cfg.Traffic.Concurrency, Requests: calibrationRequests,
		// The concurrency claim's traffic: chats sharing the prefix,
		// streaming and not in turn.
		Mode: traffic.ModeAlternate, PrefixChars: cfg.Traffic.PrefixChars, MaxTokens: cfg.Traffic.MaxTokens,
	})
	if err != nil {
		return report.DriverOverhead{NotMeasured: err.Error()}
	}
	return report.DriverOverhead{Measured: &res, How: report.HowMeasured(res)}
}

func levelsLine(r overhead.Result) string {
	var parts []string
	for _, l := range r.Levels {
		parts = append(parts, fmt.Sprintf("c=%d %.1f / %.1f", l.Concurrency, float64(l.TTFT.Max)/1e6, float64(l.Latency.Max)/1e6))
	}
	return strings.Join(parts, ", ")
}

// selectsClaim reports whether filter admits a spec of claim on some pair:
// the labels its specs carry are the pair's, claim:<kind>, feature:<claim>,
// topology:server, needs:gpu and the policy label of the router's defaults.
// An invalid filter selects nothing (the run stops before it starts).
func selectsClaim(filter, claim string) bool {
	if strings.TrimSpace(filter) == "" {
		return true
	}
	match, err := types.ParseLabelFilter(filter)
	if err != nil {
		return false
	}
	expect, err := fixtures.Expectations()
	if err != nil {
		return false
	}
	entry, ok := expect.Claim(claim)
	if !ok {
		return false
	}
	for _, p := range fixtures.DocumentedPairs {
		for _, policy := range []string{"policy:cache_aware", "policy:llm-d-scoring"} {
			labels := append(fixtures.PairLabels(p), fixtures.ClaimLabel(entry.ClaimKind()), fixtures.FeatureLabel(claim),
				fixtures.LabelServer, fixtures.LabelNeedsGPU, policy)
			if match(labels) {
				return true
			}
		}
	}
	return false
}

// overheadServer is "e2e overhead-server": the calibration's paced server.
func overheadServer(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("e2e overhead-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	addrFile := fs.String("addr-file", "", "write the bound host:port here once listening")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := overhead.Serve(ctx, *addr, *addrFile, overhead.DefaultShape); err != nil {
		fmt.Fprintln(os.Stderr, "e2e overhead-server:", err)
		return 1
	}
	return 0
}
