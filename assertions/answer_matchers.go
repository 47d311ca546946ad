package assertions

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"
)

// Answer is one HTTP answer as a spec saw it: what was asked, the status,
// and the parts of the answer a claim judges by name ("content-type",
// "error.code", "data[].id", a header).
type Answer struct {
	Request string
	Status  int
	Fields  map[string]string
}

// HaveAllAnswered succeeds when there is at least one answer and every
// answer has status and each of the fields with the value given. The
// evidence is every answer as a table, each difference marked.
func HaveAllAnswered(status int, fields map[string]string) types.GomegaMatcher {
	keys := slices.Sorted(maps.Keys(fields))
	var want []string
	for _, k := range keys {
		want = append(want, fmt.Sprintf("%s %q", k, fields[k]))
	}
	wantWords := fmt.Sprintf("status %d", status)
	if len(want) > 0 {
		wantWords += " with " + strings.Join(want, ", ")
	}
	return &evidenceMatcher{check: func(actual any) (bool, string, string, error) {
		as, ok := actual.([]Answer)
		if !ok {
			return false, "", "", wrongType("HaveAllAnswered", "a []assertions.Answer", actual)
		}
		if len(as) == 0 {
			return false, "", "", fmt.Errorf("HaveAllAnswered: no answers to judge")
		}
		header := append([]string{"request", "status"}, keys...)
		header = append(header, "")
		var rows [][]string
		wrong := 0
		for _, a := range as {
			row := []string{a.Request, fmt.Sprint(a.Status)}
			var off []string
			if a.Status != status {
				off = append(off, "status")
			}
			for _, k := range keys {
				row = append(row, fmt.Sprintf("%q", a.Fields[k]))
				if a.Fields[k] != fields[k] {
					off = append(off, k)
				}
			}
			if len(off) > 0 {
				wrong++
			}
			rows = append(rows, append(row, mark(len(off) == 0, strings.Join(off, ", "))))
		}
		ev := table(header, rows)
		return wrong == 0,
			fmt.Sprintf("Expected every answer to be %s, but %d of %d differ:\n%s", wantWords, wrong, len(as), ev),
			fmt.Sprintf("Expected some answer not to be %s, but all %d are:\n%s", wantWords, len(as), ev),
			nil
	}}
}
