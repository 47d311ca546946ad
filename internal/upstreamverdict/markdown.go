package upstreamverdict

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
)

// KnownMarkdown is the table of known differences as
// docs/upstream-routers.md shows it, generated from Known (the doc's test
// keeps them equal).
func KnownMarkdown() string {
	var b strings.Builder
	b.WriteString("| claim | pair | kind | emulated → upstream | the upstream run must show | why | source |\n|---|---|---|---|---|---|---|\n")
	for _, d := range Known {
		var shows []string
		for _, e := range d.Shows {
			shows = append(shows, e.String())
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s → %s | %s | %s | %s |\n", d.Claim, d.Pair, d.Kind, d.Emulated, d.Upstream,
			cell(strings.Join(shows, "; ")), cell(d.Why), cell(d.Cite))
	}
	return b.String()
}

// String says what the evidence asserts, in words.
func (e Evidence) String() string {
	var parts []string
	if e.Case != "" {
		parts = append(parts, "`"+e.Case+"`:")
	}
	if e.Exit != 0 {
		parts = append(parts, fmt.Sprintf("exit %d", e.Exit))
	}
	if e.Log != "" {
		parts = append(parts, "log line `"+e.Log+"`")
	}
	if e.Failure != "" {
		parts = append(parts, "failure `"+e.Failure+"`")
	}
	if e.Reason != "" {
		parts = append(parts, "skip reason `"+e.Reason+"`")
	}
	return strings.Join(parts, " ")
}

func cell(s string) string { return upstream.MarkdownCell(s) }
