package assertions

import (
	"fmt"
	"strings"
	"time"

	"github.com/onsi/gomega/types"
)

// Interception is a step the suite expects to fail, run with its failures
// caught: what they said, and how long the step took.
type Interception struct {
	Step     string
	Failures []string
	Took     time.Duration
}

// HaveFailedWithin succeeds when the step failed, within limit, with a
// first failure that contains every one of names. limit is the step's
// interval plus what handing a failure back may take (derivation says so).
// The evidence is the time taken against the limit and the failure.
func HaveFailedWithin(limit time.Duration, derivation string, names ...string) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		in, ok := actual.(Interception)
		if !ok {
			return false, "", "", wrongType("HaveFailedWithin", "an assertions.Interception", actual)
		}
		var why []string
		first := "(it did not fail)"
		if len(in.Failures) == 0 {
			why = append(why, "it did not fail")
		} else {
			first = in.Failures[0]
			for _, n := range names {
				if !strings.Contains(first, n) {
					why = append(why, fmt.Sprintf("the failure does not say %q", n))
				}
			}
		}
		if in.Took >= limit {
			why = append(why, fmt.Sprintf("it took %s", in.Took.Round(time.Millisecond)))
		}
		ev := fmt.Sprintf("  took %s, limit %s (%s)\n  failure:\n%s", in.Took.Round(time.Millisecond), limit, derivation, indent(first, "    "))
		return len(why) == 0,
			fmt.Sprintf("Expected %s to fail within %s naming %q, but %s:\n%s", in.Step, limit, names, strings.Join(why, "; "), ev),
			fmt.Sprintf("Expected %s not to fail within %s naming %q, but it did:\n%s", in.Step, limit, names, ev),
			nil
	}}
}
