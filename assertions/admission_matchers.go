package assertions

import (
	"fmt"
	"strings"

	"github.com/onsi/gomega/types"
)

// Create is one create the admission webhook judged: the router args
// given, whether it was refused and with what, beside the message the docs
// give for it.
type Create struct {
	Args    []string
	Refused bool
	Field   string
	// Message is the refusal's message, or what the create answered
	// instead ("admitted", another error).
	Message string
	// Want is the documented message the refusal must contain.
	Want string
}

// HaveEachBeenRefused succeeds when every create was refused on field
// (when the refusal names one) with a message containing its documented
// one. The evidence is every create as a table, each difference marked.
func HaveEachBeenRefused(field string) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		cs, ok := actual.([]Create)
		if !ok {
			return false, "", "", wrongType("HaveEachBeenRefused", "a []assertions.Create", actual)
		}
		if len(cs) == 0 {
			return false, "", "", fmt.Errorf("HaveEachBeenRefused: no creates to judge")
		}
		var rows [][]string
		wrong := 0
		for _, c := range cs {
			why := ""
			switch {
			case !c.Refused:
				why = "not refused by admission"
			case !strings.Contains(c.Message, c.Want):
				why = "not the documented message: " + c.Want
			case c.Field != "" && c.Field != field:
				why = "refused on another field"
			}
			if why != "" {
				wrong++
			}
			got := c.Message
			if c.Refused && c.Field != "" {
				got = c.Field + ": " + c.Message
			}
			rows = append(rows, []string{strings.Join(c.Args, " "), got, mark(why == "", why)})
		}
		ev := table([]string{"router args", "answer", ""}, rows)
		return wrong == 0,
			fmt.Sprintf("Expected every create to be refused on %s with its documented message, but %d of %d were not:\n%s", field, wrong, len(cs), ev),
			fmt.Sprintf("Expected some create to be admitted, but all %d were refused:\n%s", len(cs), ev),
			nil
	}}
}
