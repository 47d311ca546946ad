// Package assertions holds the Gomega matchers the routing specs use: Prometheus
// counter deltas and series (over metrics.Snapshot), per-replica splits (over
// split.Split) and router startup output (over log text). Every failure
// message carries its evidence: the series before and after, the split as a
// table, the banner line found or the end of the log.
//
// Where a matcher cannot judge at all (no series to take a delta, sum or
// label set of; a counter reset; no startup banner), Match returns an error
// rather than false, so neither To nor NotTo passes on missing evidence. Only
// HaveSeries treats absence as an answer (NotTo(HaveSeries(...)) is a claim),
// and the clap matchers, for which no error block means "not refused".
package assertions

import (
	"fmt"
	"strings"
)

// evidenceMatcher runs a check that explains itself; Gomega then asks for
// the message the check already wrote.
type evidenceMatcher struct {
	check   func(actual any) (ok bool, failure, negated string, err error)
	failure string
	negated string
}

func (m *evidenceMatcher) Match(actual any) (bool, error) {
	ok, f, n, err := m.check(actual)
	m.failure, m.negated = f, n
	return ok, err
}

func (m *evidenceMatcher) FailureMessage(any) string        { return m.failure }
func (m *evidenceMatcher) NegatedFailureMessage(any) string { return m.negated }

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

func wrongType(matcher, want string, actual any) error {
	return fmt.Errorf("%s expects %s, got %T", matcher, want, actual)
}
