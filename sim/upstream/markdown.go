package upstream

import (
	"fmt"
	"strings"
)

// TranslationsMarkdown is the translation table as docs/routers-from-source.md
// shows it, generated from Translations (the doc's test keeps them equal).
func TranslationsMarkdown() string {
	var b strings.Builder
	b.WriteString("| row | routers | the operator renders | the binary on the sim gets | why | source |\n|---|---|---|---|---|---|\n")
	for _, t := range Translations {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", t.Name, strings.Join(t.Routers, ", "),
			MarkdownCell(t.Rendered), MarkdownCell(t.Upstream), MarkdownCell(t.Why), MarkdownCell(t.Cite))
	}
	return b.String()
}

// MarkdownCell is s fit for one Markdown table cell.
func MarkdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
