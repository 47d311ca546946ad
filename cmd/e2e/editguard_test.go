package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/report"
)

// TestEditGuardFallsBackOnTheSim runs make e2e on the sim with its
// operator's test-only knob on, which makes every router edit replace the
// engine Pods, as another operator version could. The first edit that
// does trips the guard: the run says so in one line, switch fails with
// that evidence, the claims keep their results on deployments created per
// router-argument set from then on, and the report records the fallback.
func TestEditGuardFallsBackOnTheSim(t *testing.T) {
	if os.Getenv(config.EnvReliability) == "" {
		t.Skip("runs make e2e on the sim; make reliability (part of make test) runs it with " + config.EnvReliability + "=1")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	art := t.TempDir()
	cmd := exec.Command("make", "-s", "e2e", "ARTIFACTS="+art, "GINKGO_NODES=1",
		"GINKGO_LABEL_FILTER=router:vllm-router && (feature:roundrobin || feature:badpolicy || feature:random || feature:switch)")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), config.EnvTestOnlyReplaceEngines+"=1", config.EnvIsolate+"=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make e2e passed with an operator that replaces engines on a router edit:\n%s", out)
	}
	r, err := report.Load(filepath.Join(art, report.FileJSON))
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, out)
	}
	guard := r.Environment.Edits.Fallback
	if !strings.HasPrefix(guard, "edit guard: editing spec.router.extraArgs of ") || !strings.Contains(guard, "replaced engine Pods") {
		t.Fatalf("report.json environment.edits.fallback = %q\n%s", guard, out)
	}
	if !strings.Contains(string(out), "! "+guard) {
		t.Errorf("the end-of-run summary does not say it in one line:\n%s", out)
	}
	results := map[string]string{}
	var switchReasons []string
	for _, c := range r.Claims {
		for _, row := range c.Rows {
			if row.Pair == "vllm-router+vLLM" {
				results[c.Name] = row.Result
				if c.Name == "switch" {
					switchReasons = row.Reasons
				}
			}
		}
	}
	for claim, want := range map[string]string{"roundrobin": report.ResultPass, "badpolicy": report.ResultPass, "random": report.ResultPass,
		"switch": report.ResultFail} {
		if results[claim] != want {
			t.Errorf("%s: %s, want %s (switch: %v)", claim, results[claim], want, switchReasons)
		}
	}
	if !strings.Contains(strings.Join(switchReasons, " "), "replaced") {
		t.Errorf("switch fails without the evidence: %v", switchReasons)
	}
	// One deployment edited until the guard tripped, then one per router
	// argument set: the two bad values left, random, and the defaults for
	// switch.
	if n := r.Environment.Cost.ModelDeployments; n != 5 {
		t.Errorf("%d ModelDeployments, want 5 (1 shared until the guard, then 4 created per router-argument set)", n)
	}
}
