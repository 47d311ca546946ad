package docs

import (
	"flag"
	"github.com/gpustack/routing-conformance/internal/eppdiff"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/upstream"
)

var update = flag.Bool("update", false, "rewrite the generated tables of routers-from-source.md and upstream-llmd.md")

// generated are the pages' tables, each made from the one Go table the code
// runs on, so the page and the code never say two things.
var generated = map[string]map[string]func() string{
	"routers-from-source.md": {
		"translations": upstream.TranslationsMarkdown,
		"patches":      upstream.PatchesMarkdown,
	},
	"upstream-llmd.md": {
		"epp-translations":      upstream.EPPTranslationsMarkdown,
		"epp-known-differences": eppdiff.KnownMarkdown,
	},
}

// TestRouterTables: routers-from-source.md holds each table exactly as its
// Go table renders it (-update rewrites them).
func TestRouterTables(t *testing.T) {
	for page, tables := range generated {
		checkGenerated(t, page, tables)
	}
}

func checkGenerated(t *testing.T, page string, tables map[string]func() string) {
	t.Helper()
	path := filepath.Join(repoRoot(t), "docs", page)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for name, render := range tables {
		block := regexp.MustCompile(`(?s)(<!-- generated: ` + name + ` -->\n)(.*?)(<!-- end: ` + name + ` -->)`)
		m := block.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("docs/%s has no <!-- generated: %s --> ... <!-- end: %s --> block", page, name, name)
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
		t.Errorf("docs/%s's %s table differs from the code's; run go test ./docs -run TestRouterTables -update\ncode:\n%s", page, name, want)
	}
	if *update {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPinnedSdistDigestsAreThePins: the sdist digests the pins section and
// the README show are the ones sdists.txt pins, so the prose cannot drift
// from what make routers checks.
func TestPinnedSdistDigestsAreThePins(t *testing.T) {
	root := repoRoot(t)
	pins, err := os.ReadFile(filepath.Join(root, "sim", "upstream", "sdists.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]bool{}
	for _, line := range strings.Split(string(pins), "\n") {
		if f := strings.Fields(line); len(f) == 6 && !strings.HasPrefix(line, "#") {
			pinned[f[5]] = true
		}
	}
	if len(pinned) != 2 {
		t.Fatalf("sdists.txt pins %d sdists, want the two routers'", len(pinned))
	}
	digest := regexp.MustCompile("`([0-9a-f]{64})`")
	for file, heading := range map[string]string{"docs/routers-from-source.md": "The pins", "README.md": "Routers built from source"} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		var body string
		for _, s := range sections(string(b)) {
			if s.Heading == heading {
				body = s.Body
			}
		}
		found := digest.FindAllStringSubmatch(body, -1)
		if len(found) != 2 {
			t.Errorf("%s, %q: %d sdist digests, want the two pinned routers'", file, heading, len(found))
		}
		for _, m := range found {
			if !pinned[m[1]] {
				t.Errorf("%s, %q: sha256 %s is not a digest sdists.txt pins", file, heading, m[1])
			}
		}
	}
}
