package assertions

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/metrics"
)

func snapshotOf(matcher string, actual any) (metrics.Snapshot, error) {
	switch s := actual.(type) {
	case metrics.Snapshot:
		return s, nil
	case *metrics.Snapshot:
		if s != nil {
			return *s, nil
		}
	}
	return metrics.Snapshot{}, wrongType(matcher, "a metrics.Snapshot", actual)
}

// deltaEvidence lists every series' before → after and where they came from.
func deltaEvidence(ds []metrics.SeriesDelta, before, after metrics.Snapshot) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("  ")
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "  (before: %s at %s; after: %s at %s)", strings.Join(before.Sources, ", "), before.Time.Format("15:04:05.000"),
		strings.Join(after.Sources, ", "), after.Time.Format("15:04:05.000"))
	return b.String()
}

// HaveCounterRisenBy succeeds when the series of name selected by ms, summed
// (over workers, finished reasons, merged router Pods), rose by exactly n
// from before to the actual metrics.Snapshot. A counter reset or a missing
// series is an error that shows the series.
//
//	Expect(after).To(HaveCounterRisenBy(before, "vllm_router_policy_decisions_total", 120, metrics.Eq("policy", "round_robin")))
func HaveCounterRisenBy(before metrics.Snapshot, name string, n float64, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		after, err := snapshotOf("HaveCounterRisenBy", actual)
		if err != nil {
			return false, "", "", err
		}
		ds, err := metrics.Deltas(before, after, name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveCounterRisenBy(%s, %s): %w", sel, metrics.FormatValue(n), err)
		}
		got := metrics.SumDeltas(ds)
		ev := deltaEvidence(ds, before, after)
		return got == n,
			fmt.Sprintf("Expected %s to have risen by %s between the snapshots, but it rose by %s:\n%s", sel, metrics.FormatValue(n), metrics.FormatValue(got), ev),
			fmt.Sprintf("Expected %s not to have risen by %s between the snapshots, but it did:\n%s", sel, metrics.FormatValue(n), ev),
			nil
	}}
}

// HaveDelta passes the summed rise of the selected series to inner, e.g.
// HaveDelta(before, "vllm:prefix_cache_hits_total", BeNumerically(">=", 512)).
func HaveDelta(before metrics.Snapshot, name string, inner types.GomegaMatcher, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		after, err := snapshotOf("HaveDelta", actual)
		if err != nil {
			return false, "", "", err
		}
		ds, err := metrics.Deltas(before, after, name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveDelta(%s): %w", sel, err)
		}
		got := metrics.SumDeltas(ds)
		ok, err := inner.Match(got)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveDelta(%s): %w", sel, err)
		}
		msg := fmt.Sprintf("The rise of %s (%s) failed:\n%s\nevidence:\n%s", sel, metrics.FormatValue(got), indent(innerMessage(inner, ok, got), "  "), deltaEvidence(ds, before, after))
		return ok, msg, msg, nil
	}}
}

// HaveDeltaBy passes the rise of the selected series per value of label (a
// map[string]float64, like PromQL `sum by (label)`) to inner, e.g. 60 per
// worker: HaveDeltaBy(before, "vllm_router_policy_decisions_total", "worker",
// HaveEach(BeEquivalentTo(60)), metrics.Eq("policy", "round_robin")).
func HaveDeltaBy(before metrics.Snapshot, name, label string, inner types.GomegaMatcher, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		after, err := snapshotOf("HaveDeltaBy", actual)
		if err != nil {
			return false, "", "", err
		}
		ds, err := metrics.Deltas(before, after, name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveDeltaBy(%s by %s): %w", sel, label, err)
		}
		by := metrics.SumDeltasBy(ds, label)
		ok, err := inner.Match(by)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveDeltaBy(%s by %s): %w", sel, label, err)
		}
		msg := fmt.Sprintf("The rise of %s by %s:\n%s\n%s\nevidence:\n%s", sel, label, groupTable(label, by), indent(innerMessage(inner, ok, by), "  "), deltaEvidence(ds, before, after))
		return ok, msg, msg, nil
	}}
}

// innerMessage asks a wrapped matcher for the one message that applies: a
// matcher's FailureMessage is only valid after it failed (gomega's And keeps
// state for it), its NegatedFailureMessage only after it succeeded.
func innerMessage(inner types.GomegaMatcher, ok bool, actual any) string {
	if ok {
		return inner.NegatedFailureMessage(actual)
	}
	return inner.FailureMessage(actual)
}

func groupTable(label string, by map[string]float64) string {
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		shown := k
		if k == "" {
			shown = "(no " + label + ")"
		}
		fmt.Fprintf(&b, "  %s=%s: %s\n", label, shown, metrics.FormatValue(by[k]))
	}
	return strings.TrimRight(b.String(), "\n")
}

// HaveSeries succeeds when the snapshot has at least one series of name
// whose labels satisfy ms (metrics.Has("worker") for "has a worker label").
// On failure it lists the series of that name, or the nearest names.
func HaveSeries(name string, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := snapshotOf("HaveSeries", actual)
		if err != nil {
			return false, "", "", err
		}
		got, err := s.Select(name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveSeries(%s): %w", sel, err)
		}
		if len(got) == 0 {
			return false, fmt.Sprintf("Expected a series %s, but: %v", sel, s.NoSeries(name, ms...)), "", nil
		}
		return true, "", fmt.Sprintf("Expected no series %s, but found:\n%s", sel, sampleLines(got)), nil
	}}
}

// HaveSum passes the sum of the selected series in the snapshot to inner,
// e.g. HaveSum("vllm:num_requests_running", BeZero()).
func HaveSum(name string, inner types.GomegaMatcher, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := snapshotOf("HaveSum", actual)
		if err != nil {
			return false, "", "", err
		}
		sum, err := s.Sum(name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveSum(%s): %w", sel, err)
		}
		got, _ := s.Select(name, ms...)
		ok, err := inner.Match(sum)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveSum(%s): %w", sel, err)
		}
		msg := fmt.Sprintf("The sum of %s (%s) failed:\n%s\nseries:\n%s", sel, metrics.FormatValue(sum), indent(innerMessage(inner, ok, sum), "  "), sampleLines(got))
		return ok, msg, msg, nil
	}}
}

// HaveSumBy passes the selected series summed per value of label (a
// map[string]float64) to inner, e.g. every router Pod's picks:
// HaveSumBy("smg_worker_selection_total", metrics.SourceLabel, HaveLen(2)).
func HaveSumBy(name, label string, inner types.GomegaMatcher, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := snapshotOf("HaveSumBy", actual)
		if err != nil {
			return false, "", "", err
		}
		by, err := s.SumBy(name, label, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveSumBy(%s by %s): %w", sel, label, err)
		}
		ok, err := inner.Match(by)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveSumBy(%s by %s): %w", sel, label, err)
		}
		msg := fmt.Sprintf("The sum of %s by %s:\n%s\n%s", sel, label, groupTable(label, by), indent(innerMessage(inner, ok, by), "  "))
		return ok, msg, msg, nil
	}}
}

// HaveLabelValuesIn succeeds when there is at least one series of name
// (selected by ms) and every one carries label with a value in allowed, e.g.
// every vllm_router_processed_requests_total has a worker naming a replica's
// Pod address. Failure lists the offending series and the allowed set.
func HaveLabelValuesIn(name, label string, allowed []string, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	allowedSorted := slices.Sorted(slices.Values(allowed))
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := snapshotOf("HaveLabelValuesIn", actual)
		if err != nil {
			return false, "", "", err
		}
		got, err := s.Select(name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveLabelValuesIn(%s, %s): %w", sel, label, err)
		}
		set := fmt.Sprintf("%q", allowedSorted)
		if len(got) == 0 {
			// "every series" of none would pass vacuously either way round.
			return false, "", "", fmt.Errorf("HaveLabelValuesIn(%s, %s in %s): %w", sel, label, set, s.NoSeries(name, ms...))
		}
		var bad []metrics.Sample
		for _, smp := range got {
			v, has := smp.Labels[label]
			if !has || !slices.Contains(allowed, v) {
				bad = append(bad, smp)
			}
		}
		if len(bad) > 0 {
			return false, fmt.Sprintf("Expected every series %s to have %s in %s, but %d of %d do not:\n%s",
				sel, label, set, len(bad), len(got), sampleLines(bad)), "", nil
		}
		return true, "", fmt.Sprintf("Expected some series %s to have %s outside %s, but all %d are inside:\n%s",
			sel, label, set, len(got), sampleLines(got)), nil
	}}
}

func sampleLines(ss []metrics.Sample) string {
	var b strings.Builder
	for i, s := range ss {
		if i == 20 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(ss)-20)
			break
		}
		b.WriteString("  ")
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}
