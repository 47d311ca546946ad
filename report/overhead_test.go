package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/traffic/overhead"
)

func measured() *overhead.Result {
	return &overhead.Result{
		MeasuredAt: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC),
		Machine:    overhead.Machine{CPUs: 2, GOMAXPROCS: 2, CPUModel: "AMD EPYC", GoVersion: "go1.26.8", OS: "linux/amd64"},
		Shape:      overhead.ShapeJSON{FirstToken: 10 * time.Millisecond, Chunks: 8, Gap: 2 * time.Millisecond},
		Mode:       "alternate",
		Levels: []overhead.Level{{Concurrency: 2,
			TTFT:    overhead.Bound{P50: 200 * time.Microsecond, P99: 700 * time.Microsecond, Max: 1300 * time.Microsecond},
			Latency: overhead.Bound{P50: 300 * time.Microsecond, P99: 900 * time.Microsecond, Max: 2100 * time.Microsecond}}},
	}
}

// Every latency table states the bound measured at its levels, where it
// was measured, and at a level the calibration did not run, that it has
// none; the sim's caveat goes with it.
func TestSweepTablesStateTheDriversMeasuredBound(t *testing.T) {
	r := sweepReport(t)
	m := measured()
	r.attachDriverOverhead(&DriverOverhead{Measured: m, How: HowMeasured(*m)})
	if b := r.Sweeps[0].Levels[0].DriverBound; b == nil || b.TTFTMaxMs != 1.3 || b.LatencyP99Ms != 0.9 {
		t.Fatalf("c=2 bound %+v", b)
	}
	if r.Sweeps[0].Levels[1].DriverBound != nil {
		t.Fatal("c=16 has a bound the calibration never measured")
	}
	md := Markdown(r)
	for _, want := range []string{
		"| 2 | 61/60 | 0 of 121 | 20.0 / 31.5 / 40.0 | 2.0 / 3.0 / 4.0 | ≤ 1.3 / ≤ 2.1 (p99 0.7 / 0.9) |",
		"| 16 | 121/0 | 0 of 121 | 20.0 / 31.5 / 40.0 | 2.0 / 3.0 / 4.0 | not measured |",
		"measured at the start of this run (2026-12-04T15:00:00Z) on the machine that ran the traffic driver (2 CPUs (AMD EPYC), go1.26.8 linux/amd64)",
		"first token after 10ms, 8 more chunks 2ms apart",
		"Note: on the sim the routers and engines run in the suite's own process",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	page, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "<td>≤ 1.3 / ≤ 2.1 (p99 0.7 / 0.9)</td>") || !strings.Contains(page, `<p class="bound">Driver overhead bound`) {
		t.Error("html lacks the bound column or its note")
	}
	js, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(js), `"driverOverhead":{"ttftMaxMs":1.3`) {
		t.Errorf("report.json lacks the level's bound: %v", err)
	}
}

func TestSweepTablesWithoutACalibrationSaySo(t *testing.T) {
	t.Setenv(config.EnvDriverOverhead, "")
	r := sweepReport(t)
	r.attachDriverOverhead(readDriverOverhead())
	md := Markdown(r)
	if !strings.Contains(md, "Driver overhead: not measured (the suite ran without make e2e's driver calibration") ||
		!strings.Contains(md, "these latencies carry no measured bound") {
		t.Errorf("markdown does not say the bound is missing:\n%s", md)
	}
	if _, err := HTML(r); err != nil {
		t.Fatal(err)
	}
	// Rendering a report that has none at all (an older report.json).
	r.DriverOverhead = nil
	if _, err := HTML(r); err != nil {
		t.Fatal(err)
	}
}

func TestDriverOverheadIsReadFromTheFileTheRunnerNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileDriverOverhead)
	m := measured()
	b, _ := json.Marshal(DriverOverhead{Measured: m, How: HowMeasured(*m)})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvDriverOverhead, path)
	d := readDriverOverhead()
	if d.Measured == nil || len(d.Measured.Levels) != 1 || !strings.Contains(d.How, "paced server") {
		t.Errorf("read %+v", d)
	}
	t.Setenv(config.EnvDriverOverhead, filepath.Join(t.TempDir(), "missing.json"))
	if d := readDriverOverhead(); d.Measured != nil || !strings.Contains(d.NotMeasured, "unreadable") {
		t.Errorf("a missing file read as %+v", d)
	}
}
