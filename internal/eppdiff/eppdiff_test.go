package eppdiff

import (
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/report"
)

func run(epp string, results map[string]string) *report.Report {
	r := &report.Report{}
	for _, p := range []string{"vllm-router+vLLM", "llm-d-router+vLLM", "llm-d-router+SGLang"} {
		r.Environment.RouterCode = append(r.Environment.RouterCode, report.PairRouterCode{Pair: p, RouterCode: clusters.RouterCode{Implementation: epp}})
	}
	c := report.ClaimTable{Name: "affinity"}
	for pair, res := range results {
		c.Rows = append(c.Rows, report.ClaimRow{Pair: pair, Result: res, Measured: []string{res + " measured"}})
	}
	r.Claims = []report.ClaimTable{c}
	return r
}

func TestAgreeingRunsPass(t *testing.T) {
	both := map[string]string{"llm-d-router+vLLM": "PASS", "llm-d-router+SGLang": "PASS", "vllm-router+vLLM": "FAIL"}
	c, err := Compare(run(clusters.RouterEmulated, both), run(clusters.RouterBuilt, both), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 2 {
		t.Fatalf("rows %+v, want the two llm-d pairs only", c.Rows)
	}
}

func TestADifferingResultFailsUnlessKnown(t *testing.T) {
	em := run(clusters.RouterEmulated, map[string]string{"llm-d-router+vLLM": "PASS", "llm-d-router+SGLang": "PASS"})
	up := run(clusters.RouterBuilt, map[string]string{"llm-d-router+vLLM": "FAIL", "llm-d-router+SGLang": "PASS"})
	c, err := Compare(em, up, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Err()
	if err == nil || !strings.Contains(err.Error(), "affinity / llm-d-router+vLLM: PASS on the emulated EPP, FAIL on llm-d's") {
		t.Fatalf("err %v, want the row named with both results", err)
	}
	known := []Difference{{Claim: "affinity", Pair: "llm-d-router+vLLM", Why: "w", Evidence: "e", Source: "s"}}
	c, err = Compare(em, up, known)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("a known row still fails: %v", err)
	}
	if !strings.Contains(c.Markdown(), "known: w") {
		t.Fatalf("markdown %q does not carry the known row's reason", c.Markdown())
	}
}

func TestAKnownRowThatDidNotOccurIsStale(t *testing.T) {
	both := map[string]string{"llm-d-router+vLLM": "PASS", "llm-d-router+SGLang": "PASS"}
	known := []Difference{{Claim: "affinity", Pair: "llm-d-router+SGLang"}}
	c, err := Compare(run(clusters.RouterEmulated, both), run(clusters.RouterBuilt, both), known)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "did not in this run") {
		t.Fatalf("err %v, want the stale row named", err)
	}
}

func TestRunsOfTheWrongEPPAreRefused(t *testing.T) {
	both := map[string]string{"llm-d-router+vLLM": "PASS"}
	_, err := Compare(run(clusters.RouterEmulated, both), run(clusters.RouterEmulated, both), nil)
	if err == nil || !strings.Contains(err.Error(), `the upstream run: its environment names the llm-d-router+vLLM EPP as "emulated"`) {
		t.Fatalf("err %v, want the upstream run refused", err)
	}
	if _, err := Compare(&report.Report{}, run(clusters.RouterBuilt, both), nil); err == nil || !strings.Contains(err.Error(), "E2E_ROUTERS=llm-d-router") {
		t.Fatalf("err %v, want a run without llm-d pairs refused", err)
	}
}

func TestKnownRowsCarryEvidenceAndASource(t *testing.T) {
	for _, d := range Known {
		if d.Why == "" || d.Evidence == "" || !strings.Contains(d.Source, "@") {
			t.Errorf("%s / %s: a known difference needs why, evidence and a repo@commit:path source", d.Claim, d.Pair)
		}
	}
}
