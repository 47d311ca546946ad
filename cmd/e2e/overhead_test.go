package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/suiterun"
	"github.com/gpustack/routing-conformance/report"
)

// TestMain lets the test binary be its own calibration server, as bin/e2e
// is: calibrate starts os.Executable() with "overhead-server".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "overhead-server" {
		os.Exit(overheadServer(context.Background(), os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestCalibrationMeasuresTheConfigsLevelsInAServerProcess(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "e2e.yaml")
	if err := os.WriteFile(cfg, []byte("traffic:\n  concurrency: [1, 4]\n  prefixChars: 100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvDriverOverhead, "")
	var out bytes.Buffer
	path := filepath.Join(dir, "artifacts", report.FileDriverOverhead)
	calibrate(t.Context(), suiterun.Options{Out: &out, Config: cfg}, path)
	if os.Getenv(config.EnvDriverOverhead) != path {
		t.Fatalf("%s not pointed at %s: %q", config.EnvDriverOverhead, path, os.Getenv(config.EnvDriverOverhead))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d report.DriverOverhead
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Measured == nil || len(d.Measured.Levels) != 2 || d.Measured.Levels[1].Concurrency != 4 || d.Measured.Levels[1].Requests != 200 {
		t.Fatalf("measured %+v (not measured: %s)", d.Measured, d.NotMeasured)
	}
	if d.Measured.Mode != "alternate" || d.Measured.Levels[0].TTFT.Max <= 0 || !strings.Contains(d.How, "paced server in a process of its own") {
		t.Errorf("measurement %+v, how %q", d.Measured, d.How)
	}
	if !strings.Contains(out.String(), "e2e: driver overhead on this machine (ms, TTFT / latency, max): c=1 ") {
		t.Errorf("output %q", out.String())
	}
}

func TestCalibrationSaysWhyItDidNotMeasure(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(config.EnvDriverOverhead, "")
	var out bytes.Buffer
	path := filepath.Join(dir, report.FileDriverOverhead)
	calibrate(t.Context(), suiterun.Options{Out: &out, Config: filepath.Join(dir, "missing.yaml")}, path)
	if !strings.Contains(out.String(), "driver overhead not measured: the suite config did not load") {
		t.Errorf("output %q", out.String())
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"notMeasured": "the suite config did not load`) {
		t.Errorf("file %s", b)
	}
}

func TestOnlyARunThatCanSelectTheConcurrencyClaimIsCalibrated(t *testing.T) {
	for filter, want := range map[string]bool{
		"":                     true,
		"feature:concurrency":  true,
		"router:vllm-router":   true,
		"claim:documented":     false,
		"feature:roundrobin":   false,
		"!needs:gpu":           false,
		"policy:llm-d-scoring": true,
		"claim:extended && engine:SGLang && router:sglang-gateway": true,
		"topology:pd": false,
	} {
		if got := selectsClaim(filter, claimConcurrency); got != want {
			t.Errorf("selectsClaim(%q) = %v, want %v", filter, got, want)
		}
	}
}
