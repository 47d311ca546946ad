package suiterun

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/report"
)

// Flake is a spec whose result differed between runs.
type Flake struct {
	Spec string
	// Results counts the runs per result, e.g. PASS: 19, FAIL: 1.
	Results map[string]int
}

func (f Flake) String() string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(f.Results)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, f.Results[r]))
	}
	return f.Spec + " (" + strings.Join(parts, ", ") + ")"
}

// Repetition is what N runs of the suite say about its stability.
type Repetition struct {
	// Runs is how many runs were made; Reports how many wrote a report.
	Runs, Reports int
	Flaky         []Flake
	// AlwaysFailed are specs that failed in every run: broken, not flaky.
	AlwaysFailed []string
}

// Compare reads the reports of repeated runs (nil for a run without one).
func Compare(runs []*report.Report) Repetition {
	rep := Repetition{Runs: len(runs)}
	results := map[string]map[string]int{}
	var names []string
	for _, r := range runs {
		if r == nil {
			continue
		}
		rep.Reports++
		for _, s := range r.Specs {
			if results[s.Name] == nil {
				results[s.Name] = map[string]int{}
				names = append(names, s.Name)
			}
		}
	}
	for _, r := range runs {
		if r == nil {
			continue
		}
		seen := map[string]bool{}
		for _, s := range r.Specs {
			results[s.Name][s.Result]++
			seen[s.Name] = true
		}
		for _, n := range names {
			if !seen[n] {
				results[n][report.Absent]++
			}
		}
	}
	slices.Sort(names)
	for _, n := range names {
		switch {
		case len(results[n]) > 1:
			rep.Flaky = append(rep.Flaky, Flake{Spec: n, Results: results[n]})
		case results[n][report.ResultFail] == rep.Reports:
			rep.AlwaysFailed = append(rep.AlwaysFailed, n)
		}
	}
	slices.SortFunc(rep.Flaky, func(a, b Flake) int { return cmp.Compare(a.Spec, b.Spec) })
	return rep
}

// Line is the one-line verdict: "runs: 20, flaky specs: 0".
func (r Repetition) Line() string {
	s := fmt.Sprintf("runs: %d, flaky specs: %d", r.Runs, len(r.Flaky))
	if r.Reports < r.Runs {
		s += fmt.Sprintf(", runs without a report: %d", r.Runs-r.Reports)
	}
	if len(r.AlwaysFailed) > 0 {
		s += fmt.Sprintf(", specs failing in every run: %d", len(r.AlwaysFailed))
	}
	return s
}

// Stable reports whether every run wrote a report and no spec flaked or
// failed.
func (r Repetition) Stable() bool {
	return r.Reports == r.Runs && len(r.Flaky) == 0 && len(r.AlwaysFailed) == 0
}
