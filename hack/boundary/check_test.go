package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A module that crosses every boundary once: each crossing is named with
// its file, line, importer and import, and nothing else is.
func TestCheckNamesEveryCrossing(t *testing.T) {
	vs, err := Check("go", filepath.Join("testdata", "crossing"), Rules)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, filepath.ToSlash(v.Pos[strings.Index(v.Pos, "crossing"):])+" "+v.Pkg+" -> "+v.Imp)
	}
	want := []string{
		"crossing/clusters/clusters.go:6 clusters -> assertions",
		"crossing/config/config.go:4 config -> report",
		"crossing/internal/ansi/ansi.go:4 internal/ansi -> api",
		"crossing/sim/engine/engine.go:6 sim/engine -> clusters",
		"crossing/sim/engine/engine_test.go:7 sim/engine -> report",
		"crossing/suites/suites.go:4 suites -> sim/engine",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, v := range vs {
		if s := v.String(); !strings.Contains(s, v.Rule.Name) || !strings.Contains(s, v.Rule.Fix) {
			t.Errorf("%q does not say the rule and the fix", s)
		}
	}
}

// The project itself keeps its boundaries (make lint runs the same check).
func TestTheProjectKeepsItsBoundaries(t *testing.T) {
	for _, dir := range []string{filepath.Join("..", ".."), filepath.Join("..", "..", "test", "apiserver")} {
		vs, err := Check("go", dir, Rules)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			t.Error(v)
		}
	}
}

// Every package of the project sits in a layer, so a new folder is placed
// deliberately instead of escaping the layer rule.
func TestEveryPackageHasALayer(t *testing.T) {
	for _, dir := range []string{filepath.Join("..", ".."), filepath.Join("..", "..", "test", "apiserver")} {
		out, err := exec.Command("go", "list", "-C", dir, "./...").Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		for _, p := range strings.Fields(string(out)) {
			if rel, ok := relative(p); ok && layerOf(rel) < 0 {
				t.Errorf("%s is in no layer: add its folder to Layers in rules.go and to docs/architecture.md#layers", rel)
			}
		}
	}
}
