package suiterun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func report(t *testing.T, target string, specs map[string][2]string) *Report {
	t.Helper()
	r := new(Report)
	r.Environment.Target = target
	for name, res := range specs {
		r.Specs = append(r.Specs, struct {
			Name   string `json:"name"`
			Result string `json:"result"`
			Reason string `json:"reason"`
		}{name, res[0], res[1]})
	}
	return r
}

// A difference is a difference, except a skip because the target cannot
// inject the fault, which is listed apart and never counted as equal.
func TestCompare(t *testing.T) {
	sim := report(t, "sim", map[string][2]string{
		"a": {"PASS", ""}, "hang": {"PASS", ""}, "other-skip": {"PASS", ""}, "only-sim": {"PASS", ""}})
	kube := report(t, "kube", map[string][2]string{
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
