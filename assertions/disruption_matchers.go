package assertions

import (
	"fmt"
	"strings"

	"github.com/onsi/gomega/types"
)

// FailedRequests is what traffic saw over a disruption (an edit, a fault):
// what was done, the requests answered or failed, and the first failures.
type FailedRequests struct {
	Action   string
	Requests int
	Failed   int
	First    []string
}

// HaveFailedAtMost succeeds when at most bound of the requests failed; a
// negative bound is no bound (every request may fail: the claim bounds the
// time instead) and always succeeds. The evidence is the bound with its
// terms (e.g. "in flight (concurrency) + rate x fault-window (20/s x 1s)"),
// the derivation of those terms (why), and the first failures.
func HaveFailedAtMost(bound int, terms, why string) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		f, ok := actual.(FailedRequests)
		if !ok {
			return false, "", "", wrongType("HaveFailedAtMost", "an assertions.FailedRequests", actual)
		}
		ev := fmt.Sprintf("  bound %d = %s\n  derivation: %s", bound, terms, why)
		if len(f.First) > 0 {
			ev += "\n  first failures:\n" + indent(strings.Join(f.First, "\n"), "    ")
		}
		return bound < 0 || f.Failed <= bound,
			fmt.Sprintf("Expected at most %d of the %d requests during %q to fail, but %d did:\n%s", bound, f.Requests, f.Action, f.Failed, ev),
			fmt.Sprintf("Expected more than %d of the %d requests during %q to fail, but %d did:\n%s", bound, f.Requests, f.Action, f.Failed, ev),
			nil
	}}
}
