package routing

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/fixtures"
)

// caseNames are the names names(row) gives for claim's row of p, or one ""
// when the row lists none or the claim does not apply (so the pair still
// shows, skipped with the reason).
func caseNames(claim string, p api.Pair, names func(fixtures.Expectation) []string) []string {
	exp, err := fixtures.Lookup(claim, p)
	if err != nil || exp.NotApplicable != "" {
		return []string{""}
	}
	if out := names(exp); len(out) > 0 {
		return out
	}
	return []string{""}
}

// describeCases defines one container per case of claim's row of p, named
// for it (anyText for the lone "" of a pair the claim does not apply to),
// holding spec(name).
func describeCases(claim string, p api.Pair, anyText string, names func(fixtures.Expectation) []string, spec func(name string)) {
	for _, name := range caseNames(claim, p, names) {
		text := name
		if text == "" {
			text = anyText
		}
		Describe(text, func() { spec(name) })
	}
}

// findCase is the case of cases named name, failing the spec (an invalid
// input) when there is none.
func findCase[T any](cases []T, nameOf func(T) string, name, what string, p api.Pair) T {
	GinkgoHelper()
	i := slices.IndexFunc(cases, func(c T) bool { return nameOf(c) == name })
	Expect(i).To(BeNumerically(">=", 0), "invalid argument: %q is not a %s of %s in fixtures/expect.yaml", name, what, p)
	return cases[i]
}
