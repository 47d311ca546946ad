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

// HaveCounterRisenByPer succeeds when, for every value in values, the series
// of name selected by ms whose label has that value, summed, rose by exactly
// n from before to the actual metrics.Snapshot: "+60 per worker". Series with
// other values of label are shown but not judged. A counter reset or a
// missing series is an error that shows the series.
//
//	Expect(after).To(HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", workers, 60, metrics.Eq("policy", "round_robin")))
func HaveCounterRisenByPer(before metrics.Snapshot, name, label string, values []string, n float64, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	want := slices.Sorted(slices.Values(values))
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		after, err := snapshotOf("HaveCounterRisenByPer", actual)
		if err != nil {
			return false, "", "", err
		}
		if len(want) == 0 {
			return false, "", "", fmt.Errorf("HaveCounterRisenByPer(%s by %s): no %s values to judge", sel, label, label)
		}
		ds, err := metrics.Deltas(before, after, name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveCounterRisenByPer(%s by %s, %s): %w", sel, label, metrics.FormatValue(n), err)
		}
		by := metrics.SumDeltasBy(ds, label)
		var off []string
		for _, v := range want {
			if by[v] != n {
				off = append(off, fmt.Sprintf("%s=%s rose by %s", label, v, metrics.FormatValue(by[v])))
			}
		}
		ev := fmt.Sprintf("%s\nevidence:\n%s", groupTable(label, by), deltaEvidence(ds, before, after))
		return len(off) == 0,
			fmt.Sprintf("Expected %s to have risen by %s for each %s of %q, but %s:\n%s", sel, metrics.FormatValue(n), label, want, strings.Join(off, "; "), ev),
			fmt.Sprintf("Expected %s not to have risen by %s for each %s of %q, but it did:\n%s", sel, metrics.FormatValue(n), label, want, ev),
			nil
	}}
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

// HaveLabelValues succeeds when the series of name selected by ms carry
// label with exactly the values given, as a set (order free): every value
// named, and no other value or series without the label. E.g. the worker
// labels of vllm_router_processed_requests_total are exactly the replicas'
// http://<podIP>:<port>. With no series there is nothing to judge: an error
// naming the nearest series, for To and NotTo alike.
func HaveLabelValues(name, label string, values []string, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	want := slices.Compact(slices.Sorted(slices.Values(values)))
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := snapshotOf("HaveLabelValues", actual)
		if err != nil {
			return false, "", "", err
		}
		got, err := s.Select(name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveLabelValues(%s, %s): %w", sel, label, err)
		}
		if len(got) == 0 {
			return false, "", "", fmt.Errorf("HaveLabelValues(%s, %s = %q): %w", sel, label, want, s.NoSeries(name, ms...))
		}
		seen := labelValues(got, label)
		var diffs []string
		for _, v := range want {
			if !slices.Contains(seen, v) {
				diffs = append(diffs, fmt.Sprintf("no series has %s=%q", label, v))
			}
		}
		for _, v := range seen {
			switch {
			case v == "":
				diffs = append(diffs, fmt.Sprintf("a series has no %s", label))
			case !slices.Contains(want, v):
				diffs = append(diffs, fmt.Sprintf("a series has %s=%q, which is not one of them", label, v))
			}
		}
		ev := fmt.Sprintf("values found: %q\nseries:\n%s", seen, sampleLines(got))
		return len(diffs) == 0,
			fmt.Sprintf("Expected the series %s to carry %s with exactly %q, but %s:\n%s", sel, label, want, strings.Join(diffs, "; "), ev),
			fmt.Sprintf("Expected the series %s not to carry %s with exactly %q, but they do:\n%s", sel, label, want, ev),
			nil
	}}
}

// labelValues lists the distinct values of label on samples, sorted; ""
// stands for samples without it.
func labelValues(samples []metrics.Sample, label string) []string {
	var out []string
	for _, s := range samples {
		out = append(out, s.Labels[label])
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
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

// HaveLazyCounterRisenBy is HaveCounterRisenBy for a counter the router
// creates at its first increment (vllm-router's imbalance events): a
// series absent before, after or both reads as 0 rather than as no
// evidence. The evidence is every series before → after.
func HaveLazyCounterRisenBy(before metrics.Snapshot, name string, n float64, ms ...metrics.Matcher) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	sum := func(s metrics.Snapshot) (float64, error) {
		v, err := s.Sum(name, ms...)
		if metrics.IsNoSeries(err) {
			return 0, nil
		}
		return v, err
	}
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		after, err := snapshotOf("HaveLazyCounterRisenBy", actual)
		if err != nil {
			return false, "", "", err
		}
		b, err := sum(before)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveLazyCounterRisenBy(%s): before: %w", sel, err)
		}
		a, err := sum(after)
		if err != nil {
			return false, "", "", fmt.Errorf("HaveLazyCounterRisenBy(%s): after: %w", sel, err)
		}
		ev := fmt.Sprintf("  %s: %s → %s (an absent series reads 0: the router creates it at its first increment)", sel, metrics.FormatValue(b), metrics.FormatValue(a))
		return a-b == n,
			fmt.Sprintf("Expected %s to have risen by %s, but it rose by %s:\n%s", sel, metrics.FormatValue(n), metrics.FormatValue(a-b), ev),
			fmt.Sprintf("Expected %s not to have risen by %s, but it did:\n%s", sel, metrics.FormatValue(n), ev),
			nil
	}}
}

// HaveSum succeeds when the series of name selected by ms, summed, read
// exactly v (a gauge: the keys a policy remembers). The evidence is the
// series.
func HaveSum(name string, v float64, ms ...metrics.Matcher) types.GomegaMatcher {
	return sumMatcher("HaveSum", name, ms, "to read "+metrics.FormatValue(v), func(got float64) bool { return got == v })
}

// HaveSumAtMost succeeds when the series of name selected by ms, summed,
// read at most v; no series reads 0. The evidence is the series.
func HaveSumAtMost(name string, v float64, ms ...metrics.Matcher) types.GomegaMatcher {
	return sumMatcher("HaveSumAtMost", name, ms, "to sum to at most "+metrics.FormatValue(v), func(got float64) bool { return got <= v })
}

func sumMatcher(matcher, name string, ms []metrics.Matcher, want string, ok func(float64) bool) types.GomegaMatcher {
	sel := metrics.Selector(name, ms)
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := snapshotOf(matcher, actual)
		if err != nil {
			return false, "", "", err
		}
		got, err := s.Select(name, ms...)
		if err != nil {
			return false, "", "", fmt.Errorf("%s(%s): %w", matcher, sel, err)
		}
		if len(got) == 0 && matcher != "HaveSumAtMost" {
			return false, "", "", fmt.Errorf("%s(%s): %w", matcher, sel, s.NoSeries(name, ms...))
		}
		var total float64
		for _, sm := range got {
			total += sm.Value
		}
		ev := "  no series"
		if len(got) > 0 {
			ev = sampleLines(got)
		}
		return ok(total),
			fmt.Sprintf("Expected %s %s, but it reads %s:\n%s", sel, want, metrics.FormatValue(total), ev),
			fmt.Sprintf("Expected %s not %s, but it reads %s:\n%s", sel, want, metrics.FormatValue(total), ev),
			nil
	}}
}

// CheckInFlight is nil when a router's in-flight gauge reads, per replica,
// exactly the held requests it should (a replica missing from either map
// reads 0), else an error with both readings.
func CheckInFlight(gauge string, got, want map[string]int) error {
	for r, n := range want {
		if got[r] != n {
			return fmt.Errorf("the router's %s reads %v, want %v", gauge, got, want)
		}
	}
	for r, n := range got {
		if n != want[r] {
			return fmt.Errorf("the router's %s reads %v, want %v", gauge, got, want)
		}
	}
	return nil
}
