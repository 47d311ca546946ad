package assertions

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/fixtures"
)

func splitOf(matcher string, actual any) (split.Split, error) {
	var s split.Split
	switch v := actual.(type) {
	case split.Split:
		s = v
	case *split.Split:
		if v == nil {
			return s, wrongType(matcher, "a split.Split", actual)
		}
		s = *v
	default:
		return s, wrongType(matcher, "a split.Split", actual)
	}
	if len(s.Replicas) == 0 {
		return s, fmt.Errorf("%s: the split has no replicas; build it with split.FromSnapshots or split.New", matcher)
	}
	return s, nil
}

// splitMatcher states a property of a split; the table is the evidence.
func splitMatcher(name, want string, ok func(split.Split) (bool, string)) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := splitOf(name, actual)
		if err != nil {
			return false, "", "", err
		}
		pass, why := ok(s)
		return pass,
			fmt.Sprintf("Expected the split %s, but %s:\n%s", want, why, indent(s.String(), "  ")),
			fmt.Sprintf("Expected the split not %s, but it is:\n%s", want, indent(s.String(), "  ")),
			nil
	}}
}

// BeAllOnOneReplica: exactly one replica counted anything (and something was
// counted), the affinity claim.
func BeAllOnOneReplica() types.GomegaMatcher {
	return splitMatcher("BeAllOnOneReplica", "to be all on one replica", func(s split.Split) (bool, string) {
		served := s.Served()
		switch len(served) {
		case 0:
			return false, "no replica counted any request"
		case 1:
			return true, ""
		}
		return false, fmt.Sprintf("%d replicas served requests (%s)", len(served), strings.Join(served, ", "))
	})
}

// HaveTotal: the counts sum to n (no request lost or counted twice).
func HaveTotal(n int) types.GomegaMatcher {
	return splitMatcher("HaveTotal", fmt.Sprintf("to sum to %d", n), func(s split.Split) (bool, string) {
		return s.Total() == n, fmt.Sprintf("it sums to %d", s.Total())
	})
}

// HaveCounts: the counts in replica order are exactly these, e.g.
// HaveCounts(60, 60) for round robin over two replicas.
func HaveCounts(counts ...int) types.GomegaMatcher {
	want := ratio(counts)
	return splitMatcher("HaveCounts", "to be exactly "+want, func(s split.Split) (bool, string) {
		if len(counts) != len(s.Replicas) {
			return false, fmt.Sprintf("it has %d replicas, not %d", len(s.Replicas), len(counts))
		}
		return slices.Equal(s.Values(), counts), "it is " + s.Ratio()
	})
}

func ratio(counts []int) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprint(c)
	}
	return strings.Join(parts, "/")
}

// BeMadeOfWholeGroups: the split is whole groups of requests put together,
// each group on one replica: some assignment of every group to one replica
// gives exactly the split's counts. With several router Pods, each keeping
// its own requests on one replica, the groups are the Pods' request counts.
func BeMadeOfWholeGroups(groups ...int) types.GomegaMatcher {
	want := ratio(groups)
	return splitMatcher("BeMadeOfWholeGroups", "to be made of the whole groups "+want, func(s split.Split) (bool, string) {
		if wholeGroups(groups, s.Values()) {
			return true, ""
		}
		return false, fmt.Sprintf("no assignment of the groups %s to replicas gives %s: a group was split over replicas", want, s.Ratio())
	})
}

// wholeGroups tries every assignment of groups to len(counts) replicas.
func wholeGroups(groups, counts []int) bool {
	want := slices.Sorted(slices.Values(counts))
	assign := make([]int, len(groups))
	for {
		got := make([]int, len(counts))
		for g, r := range assign {
			got[r] += groups[g]
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return true
		}
		i := 0
		for ; i < len(assign); i++ {
			if assign[i]++; assign[i] < len(counts) {
				break
			}
			assign[i] = 0
		}
		if i == len(assign) {
			return false
		}
	}
}

// UseEveryReplica: every replica served at least one request (a spread
// split, e.g. least-in-flight routing under concurrency).
func UseEveryReplica() types.GomegaMatcher {
	return splitMatcher("UseEveryReplica", "to use every replica", func(s split.Split) (bool, string) {
		var idle []string
		for _, r := range s.Replicas {
			if s.Count(r) == 0 {
				idle = append(idle, r)
			}
		}
		return len(idle) == 0, fmt.Sprintf("%s served nothing", strings.Join(idle, ", "))
	})
}

// HaveEachCountWithin: every replica's count lies in [lo, hi], e.g. the
// binomial acceptance interval of a uniform random policy; derivation says
// where the bound comes from and is part of the evidence.
func HaveEachCountWithin(lo, hi int, derivation string) types.GomegaMatcher {
	return splitMatcher("HaveEachCountWithin", fmt.Sprintf("to have every count within [%d, %d] (%s)", lo, hi, derivation), func(s split.Split) (bool, string) {
		var out []string
		for _, r := range s.Replicas {
			if n := s.Count(r); n < lo || n > hi {
				out = append(out, fmt.Sprintf("%s has %d", r, n))
			}
		}
		return len(out) == 0, strings.Join(out, ", ")
	})
}

// BeAllOn: every counted request is on the named replica (and something
// was counted).
func BeAllOn(replica string) types.GomegaMatcher {
	return splitMatcher("BeAllOn", "to be all on "+replica, func(s split.Split) (bool, string) {
		if !slices.Contains(s.Replicas, replica) {
			return false, replica + " is not one of its replicas"
		}
		served := s.Served()
		if len(served) == 0 {
			return false, "no replica counted any request"
		}
		return slices.Equal(served, []string{replica}), fmt.Sprintf("it was served by %s", strings.Join(served, ", "))
	})
}

// HaveCountsByReplica: each named replica's count is exactly as given and
// every other replica's is 0.
func HaveCountsByReplica(counts map[string]int) types.GomegaMatcher {
	var want []string
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		want = append(want, fmt.Sprintf("%s=%d", r, counts[r]))
	}
	return splitMatcher("HaveCountsByReplica", "to be exactly "+strings.Join(want, ", "), func(s split.Split) (bool, string) {
		var diffs []string
		for _, r := range s.Replicas {
			if s.Count(r) != counts[r] {
				diffs = append(diffs, fmt.Sprintf("%s has %d", r, s.Count(r)))
			}
		}
		for r := range counts {
			if !slices.Contains(s.Replicas, r) {
				diffs = append(diffs, r+" is not one of its replicas")
			}
		}
		slices.Sort(diffs)
		return len(diffs) == 0, strings.Join(diffs, ", ")
	})
}

// UseReplica: the named replica served at least one request (NotTo: it
// served none, e.g. a request that least load sends elsewhere).
func UseReplica(replica string) types.GomegaMatcher {
	return splitMatcher("UseReplica", "to use "+replica, func(s split.Split) (bool, string) {
		if !slices.Contains(s.Replicas, replica) {
			return false, replica + " is not one of its replicas"
		}
		return s.Count(replica) > 0, replica + " served nothing"
	})
}

// HaveShape: a split of sent requests has its documented or derived shape
// (an expect.yaml split). It accounts for every request sent (HaveTotal),
// then: one-replica is BeAllOnOneReplica, even HaveCounts of sent/replicas
// each, binomial HaveEachCountWithin the shape's Bounds, spread
// UseEveryReplica; a recorded shape asserts only the total. The failure is
// the first unmet one's, after what the row says of the shape. A shape
// that cannot be judged (even over replicas sent does not divide, binomial
// over fewer than 2 replicas, an unknown shape) is an error.
func HaveShape(shape fixtures.Split, sent int) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		s, err := splitOf("HaveShape", actual)
		if err != nil {
			return false, "", "", err
		}
		type step struct {
			m   types.GomegaMatcher
			why string
		}
		steps := []step{{HaveTotal(sent), ""}}
		n := len(s.Replicas)
		switch shape.Shape {
		case fixtures.ShapeOneReplica:
			steps = append(steps, step{BeAllOnOneReplica(), fmt.Sprintf("documented: all on one replica (%s)", shape.Documented)})
		case fixtures.ShapeEven:
			want := shape.Expected(sent, n)
			if want == nil {
				return false, "", "", fmt.Errorf("HaveShape: %d requests do not divide evenly over %d replicas; set traffic.requests to a multiple", sent, n)
			}
			steps = append(steps, step{HaveCounts(want...), "documented: " + shape.Documented})
		case fixtures.ShapeBinomial:
			lo, hi, ok := shape.Bounds(sent, n)
			if !ok {
				return false, "", "", fmt.Errorf("HaveShape: a binomial bound needs at least 2 replicas, the split has %d", n)
			}
			steps = append(steps, step{HaveEachCountWithin(lo, hi, binomialWords(shape, sent, n)), ""})
		case fixtures.ShapeSpread:
			steps = append(steps, step{UseEveryReplica(), "derived: " + shape.Documented})
		case fixtures.ShapeRecorded:
			// Documented as measured, not as a shape: recorded in the report only.
		default:
			return false, "", "", fmt.Errorf("HaveShape: unknown split shape %q", shape.Shape)
		}
		for _, st := range steps {
			ok, err := st.m.Match(s)
			if err != nil || !ok {
				msg := st.m.FailureMessage(s)
				if st.why != "" {
					msg = st.why + "\n" + msg
				}
				return false, msg, "", err
			}
		}
		return true, "", fmt.Sprintf("Expected the split of %d requests not to have the shape %s, but it has:\n%s", sent, shape.Shape, indent(s.String(), "  ")), nil
	}}
}

// binomialWords is a binomial bound's derivation.
func binomialWords(shape fixtures.Split, sent, replicas int) string {
	return fmt.Sprintf("Bin(%d, 1/%d), the smallest interval with both tails under %v", sent, replicas, (1-shape.Confidence)/2)
}
