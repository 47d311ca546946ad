package upstream

import (
	"fmt"
	"strings"
)

// TranslationsMarkdown is the translation table as docs/upstream-routers.md
// shows it, generated from Translations (the doc's test keeps them equal).
func TranslationsMarkdown() string {
	var b strings.Builder
	b.WriteString("| row | routers | the operator renders | the upstream run gets | why | source |\n|---|---|---|---|---|---|\n")
	for _, t := range Translations {
		when := ""
		if t.Static {
			when = " (no Kubernetes API only)"
		}
		fmt.Fprintf(&b, "| `%s`%s | %s | %s | %s | %s | %s |\n", t.Name, when, strings.Join(t.Routers, ", "),
			MarkdownCell(t.Rendered), MarkdownCell(t.Upstream), MarkdownCell(t.Why), MarkdownCell(t.Cite))
	}
	return b.String()
}

// MembershipMarkdown is the verdict on each claim that changes membership
// under a static worker list, from MembershipClaims.
func MembershipMarkdown() string {
	var b strings.Builder
	b.WriteString("| claim | on the plain sim with upstream routers | why |\n|---|---|---|\n")
	for _, m := range MembershipClaims {
		verdict := "runs"
		if !m.Runs {
			verdict = "skipped, with this reason"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", m.Claim, verdict, MarkdownCell(m.Why))
	}
	return b.String()
}

// MarkdownCell is s fit for one Markdown table cell.
func MarkdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
