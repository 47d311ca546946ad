package assertions

import (
	"strings"
	"unicode/utf8"
)

// table lays out rows under header in aligned columns, indented by two
// spaces: the evidence block of a matcher's failure message.
func table(header []string, rows [][]string) string {
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	line := func(r []string) {
		b.WriteString("  ")
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
			}
		}
		b.WriteByte('\n')
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	return strings.TrimRight(b.String(), "\n")
}

// mark is "<- " plus why, or "" when ok: the column that points at what
// differs in a table.
func mark(ok bool, why string) string {
	if ok {
		return ""
	}
	return "<- " + why
}
