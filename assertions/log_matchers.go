package assertions

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"
)

// HaveLogLines succeeds when the log text (ANSI codes stripped, as
// routerlog reads it) holds each of lines as a whole line. The evidence is
// the lines missing and the end of the log.
func HaveLogLines(lines ...string) types.GomegaMatcher {
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		text, err := logText("HaveLogLines", actual)
		if err != nil {
			return false, "", "", err
		}
		got := strings.Split(strings.ReplaceAll(text, "\r", ""), "\n")
		var missing []string
		for _, l := range lines {
			if !slices.Contains(got, l) {
				missing = append(missing, l)
			}
		}
		tail := got
		if len(tail) > 20 {
			tail = tail[len(tail)-20:]
		}
		ev := "  end of the log:\n" + indent(strings.Join(tail, "\n"), "    ")
		return len(missing) == 0,
			fmt.Sprintf("Expected the log to hold the lines\n%s\nbut these are missing:\n%s\n%s", indent(strings.Join(lines, "\n"), "  "), indent(strings.Join(missing, "\n"), "  "), ev),
			fmt.Sprintf("Expected the log not to hold the lines\n%s\nbut it does:\n%s", indent(strings.Join(lines, "\n"), "  "), ev),
			nil
	}}
}
