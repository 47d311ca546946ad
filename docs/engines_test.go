package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/sglang"
	"github.com/gpustack/routing-conformance/sim/engine/vllm"
)

// engineTables are engines.md's route tables, each rendered from the table
// the engine emulation dispatches through, so the page and the sim never
// say two things.
var engineTables = map[string]func() string{
	"vllm-routes":   vllm.Routes.Markdown,
	"sglang-routes": sglang.Routes.Markdown,
}

// TestEngineRouteTables: engines.md holds each route table exactly as its Go
// table renders it (-update rewrites them).
func TestEngineRouteTables(t *testing.T) {
	path := filepath.Join(repoRoot(t), "docs", "engines.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for name, render := range engineTables {
		block := regexp.MustCompile(`(?s)(<!-- generated: ` + name + ` -->\n)(.*?)(<!-- end: ` + name + ` -->)`)
		m := block.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("docs/engines.md has no <!-- generated: %s --> ... <!-- end: %s --> block", name, name)
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
		t.Errorf("docs/engines.md's %s table differs from the code's; run go test ./docs -run TestEngineRouteTables -update\ncode:\n%s", name, want)
	}
	if *update {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
