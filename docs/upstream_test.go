package docs

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
	"github.com/gpustack/routing-conformance/internal/upstreamverdict"
)

var update = flag.Bool("update", false, "rewrite the generated tables of upstream-routers.md")

// generated are upstream-routers.md's tables, each made from the one Go
// table the code runs on, so the page and the code never say two things.
var generated = map[string]func() string{
	"translations": upstream.TranslationsMarkdown,
	"membership":   upstream.MembershipMarkdown,
	"known":        upstreamverdict.KnownMarkdown,
}

// TestUpstreamRouterTables: upstream-routers.md holds each table exactly as
// its Go table renders it (-update rewrites them).
func TestUpstreamRouterTables(t *testing.T) {
	path := filepath.Join(repoRoot(t), "docs", "upstream-routers.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for name, render := range generated {
		block := regexp.MustCompile(`(?s)(<!-- generated: ` + name + ` -->\n)(.*?)(<!-- end: ` + name + ` -->)`)
		m := block.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("docs/upstream-routers.md has no <!-- generated: %s --> ... <!-- end: %s --> block", name, name)
			continue
		}
		want := render()
		if m[2] == want {
			continue
		}
		if *update {
			text = block.ReplaceAllLiteralString(text, m[1]+want+m[3])
			continue
		}
		t.Errorf("docs/upstream-routers.md's %s table differs from the code's; run go test ./docs -run TestUpstreamRouterTables -update\ncode:\n%s", name, want)
	}
	if *update {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(text, "PLACEHOLDER") {
		t.Error("docs/upstream-routers.md still has a placeholder")
	}
}
