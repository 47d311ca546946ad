package assertions

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/assertions/split"
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

// BeAllOn: every counted request went to the named replica.
func BeAllOn(replica string) types.GomegaMatcher {
	return splitMatcher("BeAllOn", "to be all on "+replica, func(s split.Split) (bool, string) {
		if !slices.Contains(s.Replicas, replica) {
			return false, fmt.Sprintf("%s is not one of its replicas", replica)
		}
		served := s.Served()
		if len(served) == 1 && served[0] == replica {
			return true, ""
		}
		if len(served) == 0 {
			return false, "no replica counted any request"
		}
		return false, fmt.Sprintf("requests went to %s", strings.Join(served, ", "))
	})
}

// BeEvenWithin: every replica is within ±k of an even share (total/replicas).
func BeEvenWithin(k int) types.GomegaMatcher {
	return splitMatcher("BeEvenWithin", fmt.Sprintf("to be even within ±%d", k), func(s split.Split) (bool, string) {
		even := float64(s.Total()) / float64(len(s.Replicas))
		var off []string
		for _, r := range s.Replicas {
			if d := float64(s.Count(r)) - even; math.Abs(d) > float64(k) {
				off = append(off, fmt.Sprintf("%s is %+g from the even share %g", r, d, even))
			}
		}
		return len(off) == 0, strings.Join(off, "; ")
	})
}

// HaveAtLeastPerReplica: every replica counted at least m.
func HaveAtLeastPerReplica(m int) types.GomegaMatcher {
	return splitMatcher("HaveAtLeastPerReplica", fmt.Sprintf("to give every replica at least %d", m), func(s split.Split) (bool, string) {
		var low []string
		for _, r := range s.Replicas {
			if s.Count(r) < m {
				low = append(low, fmt.Sprintf("%s got %d", r, s.Count(r)))
			}
		}
		return len(low) == 0, strings.Join(low, "; ")
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
