package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

const gpu = fixtures.LabelNeedsGPU

// spec is one report.json spec as the report package writes it.
func spec(name, result, reason string, labels ...string) report.SpecResult {
	return report.SpecResult{Name: name, Result: result, Reason: reason, Labels: labels}
}

// encode writes a report.json with the report package's own types.
func encode(t *testing.T, target string, specs ...report.SpecResult) []byte {
	t.Helper()
	rep := report.Report{SchemaVersion: report.SchemaVersion, Environment: report.Environment{Target: target}, Specs: specs}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const capacitySkip = `target kube has no room for rr-vllm: needs 2 free accelerators on one Active InstanceType; the most is 0 on gpustack-nvidia-h20`

func TestCheck(t *testing.T) {
	admission := spec("Admission refuses --port", report.ResultPass, "")
	cases := []struct {
		name     string
		target   string
		specs    []report.SpecResult
		ok       bool
		contains []string
		warnings int
	}{
		{
			name:   "every GPU spec skipped for capacity",
			target: "kube",
			specs: []report.SpecResult{
				admission,
				spec("Round robin vllm-router", report.ResultSkip, capacitySkip, gpu),
				spec("Round robin sglang-gateway", report.ResultSkip, capacitySkip, gpu),
				spec("Round robin llm-d", report.ResultSkip, "not applicable: llm-d-router takes no --policy", gpu),
			},
			contains: []string{"no GPU capacity", "all 2 selected", "Round robin vllm-router", "NIGHTLY_KUBECONFIG"},
		},
		{
			name:   "some GPU specs ran, some skipped for capacity",
			target: "kube",
			specs: []report.SpecResult{
				spec("Default policy vllm-router", report.ResultPass, "", gpu),
				spec("Default policy sglang-gateway", report.ResultFail, "banner not found", gpu),
				spec("Round robin vllm-router", report.ResultSkip, capacitySkip, gpu),
			},
			ok:       true,
			contains: []string{"2 of 3 routing specs that need a GPU ran on target kube"},
			warnings: 1,
		},
		{
			name:   "every GPU spec ran",
			target: "kube",
			specs: []report.SpecResult{
				spec("Default policy vllm-router", report.ResultPass, "", gpu),
				spec("Round robin sglang-gateway", report.ResultPass, "", gpu),
			},
			ok:       true,
			contains: []string{"2 of 2"},
		},
		{
			name:   "the label filter left out every GPU spec",
			target: "kube",
			specs: []report.SpecResult{
				admission,
				spec("Round robin vllm-router", report.ResultSkip, "not selected in this run (label filter, focus or skip)", gpu),
			},
			contains: []string{"none of the 1 routing specs that need a GPU was selected"},
		},
		{
			name:   "skipped for other reasons",
			target: "kube",
			specs: []report.SpecResult{
				spec("Round robin vllm-router", report.ResultSkip, capacitySkip, gpu),
				spec("Round robin sglang-gateway", report.ResultSkip, "sglang-gateway+SGLang is not qualified in this run: e2e.yaml lists routers [vllm-router]", gpu),
			},
			contains: []string{"none of the 2 selected", "1 skipped for GPU capacity"},
		},
		{
			name:     "no spec needs a GPU",
			target:   "kube",
			specs:    []report.SpecResult{admission},
			contains: []string{"no spec labelled needs:gpu"},
		},
		{
			name:     "a sim report is not a GPU qualification",
			target:   "sim",
			specs:    []report.SpecResult{spec("Round robin vllm-router", report.ResultPass, "", gpu)},
			contains: []string{`target "sim"`, "E2E_TARGET=kube"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := parseAndCheck(encode(t, c.target, c.specs...))
			if err != nil {
				t.Fatal(err)
			}
			if v.OK != c.ok {
				t.Errorf("OK = %v, want %v; summary: %s", v.OK, c.ok, v.Summary)
			}
			for _, s := range c.contains {
				if !strings.Contains(v.Summary, s) {
					t.Errorf("summary %q does not contain %q", v.Summary, s)
				}
			}
			if len(v.Warnings) != c.warnings {
				t.Errorf("warnings = %q, want %d", v.Warnings, c.warnings)
			}
		})
	}
}

// parseAndCheck reads data as main does, with the report package's reader.
func parseAndCheck(data []byte) (Verdict, error) {
	rep, err := report.Parse(report.FileJSON, data)
	if err != nil {
		return Verdict{}, err
	}
	return Check(rep)
}

func TestCheckRefusesWhatIsNotAReport(t *testing.T) {
	for name, in := range map[string]string{
		"not JSON":       "<html>",
		"no specs":       `{"schemaVersion":2,"environment":{"target":"kube"},"specs":[]}`,
		"another schema": `{"environment":{"target":"kube"},"specs":[{"name":"a","result":"PASS","labels":["needs:gpu"]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseAndCheck([]byte(in)); err == nil {
				t.Fatal("Check accepted it")
			}
		})
	}
}

// runAsCommand makes the test binary run main instead of the tests, so
// TestMainExitCode runs the real command without building it (a build costs
// a minute on a cold cache).
const runAsCommand = "GPUCHECK_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsCommand) == "1" {
		main() // os.Args is [test binary, report path], as main expects

		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMainExitCode runs the command as the nightly does: exit 1 and the
// reason on a capacity-only run, 0 when GPU specs ran.
func TestMainExitCode(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(rep []byte) (string, int) {
		p := filepath.Join(t.TempDir(), "report.json")
		if err := os.WriteFile(p, rep, 0o600); err != nil {
			t.Fatal(err)
		}
		// The test binary runs main itself (TestMain), so no build is needed.
		cmd := exec.Command(bin, p)
		cmd.Env = append(os.Environ(), runAsCommand+"=1")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := run(encode(t, "kube", spec("Round robin vllm-router", report.ResultSkip, capacitySkip, gpu)))
	if code != 1 || !strings.Contains(out, "no GPU capacity") || !strings.Contains(out, "::error") {
		t.Errorf("capacity-only run: exit %d, output:\n%s", code, out)
	}
	out, code = run(encode(t, "kube", spec("Round robin vllm-router", report.ResultPass, "", gpu)))
	if code != 0 {
		t.Errorf("a run with a GPU spec passed: exit %d, output:\n%s", code, out)
	}
	out, code = run(nil)
	if code != 1 || !strings.Contains(out, "not a readable report.json") {
		t.Errorf("empty file: exit %d, output:\n%s", code, out)
	}
	out, code = run([]byte(`{"environment":{"target":"kube"},"specs":[]}`))
	if code != 1 || !strings.Contains(out, "no schemaVersion") || !strings.Contains(out, "report.json") {
		t.Errorf("a report of another schema: exit %d, output:\n%s", code, out)
	}
}
