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

// TestPinnedWheelDigestsAreTheLockedOnes: the wheel digests the pins
// section and the README show are hashes requirements.txt locks for the
// pinned routers, so the prose cannot drift from the lock.
func TestPinnedWheelDigestsAreTheLockedOnes(t *testing.T) {
	root := repoRoot(t)
	req, err := os.ReadFile(filepath.Join(root, "clusters", "sim", "upstream", "requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	locked := map[string]bool{}
	for _, block := range regexp.MustCompile(`(?m)^(?:vllm-router|sglang-router)==\S+ \\\n((?:\s+--hash=sha256:[0-9a-f]{64}.*\n)+)`).FindAllStringSubmatch(string(req), -1) {
		for _, h := range regexp.MustCompile(`[0-9a-f]{64}`).FindAllString(block[1], -1) {
			locked[h] = true
		}
	}
	if len(locked) == 0 {
		t.Fatal("requirements.txt locks no hash for vllm-router or sglang-router")
	}
	digest := regexp.MustCompile("`([0-9a-f]{64})`")
	for file, heading := range map[string]string{"docs/upstream-routers.md": "The pins", "README.md": "Upstream routers"} {
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
			t.Errorf("%s, %q: %d wheel digests, want the two pinned routers'", file, heading, len(found))
		}
		for _, m := range found {
			if !locked[m[1]] {
				t.Errorf("%s, %q: sha256 %s is not a hash requirements.txt locks for the pinned routers", file, heading, m[1])
			}
		}
	}
}
