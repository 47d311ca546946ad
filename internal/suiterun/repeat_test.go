package suiterun

import (
	"testing"

	"github.com/gpustack/routing-conformance/report"
)

func run(results map[string]string) *report.Report {
	r := &report.Report{}
	for name, res := range results {
		r.Specs = append(r.Specs, report.SpecResult{Name: name, Result: res})
	}
	return r
}

func TestRepeatNamesFlakySpecsAndTellsThemFromBrokenOnes(t *testing.T) {
	runs := []*report.Report{
		run(map[string]string{"a": "PASS", "b": "PASS", "c": "FAIL", "d": "SKIP", "e": "PASS"}),
		run(map[string]string{"a": "PASS", "b": "FAIL", "c": "FAIL", "d": "SKIP"}),
		nil, // a run that wrote no report
		run(map[string]string{"a": "PASS", "b": "PASS", "c": "FAIL", "d": "SKIP", "e": "PASS"}),
	}
	rep := Compare(runs)
	if rep.Runs != 4 || rep.Reports != 3 {
		t.Errorf("runs %d, reports %d", rep.Runs, rep.Reports)
	}
	if len(rep.Flaky) != 2 || rep.Flaky[0].String() != "b (FAIL 1, PASS 2)" || rep.Flaky[1].String() != "e (PASS 2, absent 1)" {
		t.Errorf("flaky %v", rep.Flaky)
	}
	if len(rep.AlwaysFailed) != 1 || rep.AlwaysFailed[0] != "c" {
		t.Errorf("always failed %v", rep.AlwaysFailed)
	}
	if got := rep.Line(); got != "runs: 4, flaky specs: 2, runs without a report: 1, specs failing in every run: 1" {
		t.Errorf("line %q", got)
	}
	if rep.Stable() {
		t.Error("an unstable suite reads as stable")
	}
	steady := Compare([]*report.Report{run(map[string]string{"a": "PASS"}), run(map[string]string{"a": "PASS"})})
	if steady.Line() != "runs: 2, flaky specs: 0" || !steady.Stable() {
		t.Errorf("steady %q", steady.Line())
	}
}
