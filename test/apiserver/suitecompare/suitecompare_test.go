package suitecompare

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/internal/suiterun"
	"github.com/gpustack/routing-conformance/report"
)

func run(t *testing.T, target string, specs map[string][2]string) *report.Report {
	t.Helper()
	r := &report.Report{Environment: report.Environment{Target: target}}
	for name, res := range specs {
		r.Specs = append(r.Specs, report.SpecResult{Name: name, Result: res[0], Reason: res[1]})
	}
	return r
}

// A difference is a difference, except a skip because the target cannot
// inject the fault, which is listed apart and never counted as equal.
func TestCompare(t *testing.T) {
	sim := run(t, "sim", map[string][2]string{
		"a": {"PASS", ""}, "hang": {"PASS", ""}, "other-skip": {"PASS", ""}, "only-sim": {"PASS", ""}})
	kube := run(t, "kube", map[string][2]string{
		"a":          {"PASS", ""},
		"hang":       {"SKIP", "making a Pod hang needs a chaos tool: " + Unsupported},
		"other-skip": {"SKIP", "no capacity"},
	})
	diff, unsupported := Compare(sim, kube)
	if len(diff) != 2 || !strings.Contains(diff[0], "spec only-sim: PASS in sim, absent in kube") ||
		!strings.Contains(diff[1], "spec other-skip: PASS in sim, SKIP in kube") {
		t.Errorf("diff %q", diff)
	}
	if len(unsupported) != 1 || !strings.HasPrefix(unsupported[0], "spec hang: PASS in sim, skipped in kube") {
		t.Errorf("unsupported %q", unsupported)
	}

	// Claim cells likewise, by claim and pair.
	cells := func(r *report.Report, rows ...report.ClaimRow) *report.Report {
		r.Specs = nil
		r.Claims = []report.ClaimTable{{Name: "fault", Rows: rows}}
		return r
	}
	sim = cells(sim, report.ClaimRow{Pair: "p1", Result: "PASS"}, report.ClaimRow{Pair: "p2", Result: "PASS"})
	kube = cells(kube, report.ClaimRow{Pair: "p1", Result: "FAIL", Reasons: []string{"x"}},
		report.ClaimRow{Pair: "p2", Result: "SKIP", Reasons: []string{Unsupported}})
	diff, unsupported = Compare(sim, kube)
	if len(diff) != 1 || diff[0] != "fault / p1: PASS in sim, FAIL in kube" {
		t.Errorf("cells: diff %q", diff)
	}
	if len(unsupported) != 1 || !strings.HasPrefix(unsupported[0], "fault / p2: PASS in sim, skipped in kube") {
		t.Errorf("cells: unsupported %q", unsupported)
	}
}

// Exec reads the run's report with report.Load: one of another schema
// version is the run's error, naming the file.
func TestExecReadsTheReportWithTheReportsReader(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, suiterun.SuitePackage), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, report.FileJSON), []byte(`{"result":"PASS"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	res := Run{Binary: "true", Repo: dir, Artifacts: dir, Timeout: time.Minute}.Exec(t.Context())
	var se *report.SchemaError
	if !errors.As(res.Err, &se) || res.Report != nil {
		t.Errorf("Exec = %v, %v; want the report's schema error", res.Err, res.Report)
	}
}

func TestSimKnobs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "e2e.yaml")
	os.WriteFile(file, []byte("sim:\n  engineTTFT: 2ms\n  engineITL: 1ms\n  engineOutputTokens: 16\n"), 0o644)
	got, err := SimKnobs(file)
	if err != nil || got.EngineITL.D() != time.Millisecond || got.EngineTTFT.D() != 2*time.Millisecond || got.EngineOutputTokens != 16 {
		b, _ := json.Marshal(got)
		t.Errorf("SimKnobs = %s, %v", b, err)
	}
	os.WriteFile(file, []byte("routers: []\n"), 0o644)
	if _, err := SimKnobs(file); err == nil || !strings.Contains(err.Error(), "sim.engineITL") {
		t.Errorf("a config without sim knobs: %v", err)
	}
}
