package main

import (
	"fmt"
	"strings"
)

// Module is the suite's module path; the API-server tier's module lives
// below it (test/apiserver) and is checked with the same rules.
const Module = "github.com/gpustack/routing-conformance"

// Rule is one boundary: a package matched by From must not import a
// package matched by To, unless Allowed says that importer may.
type Rule struct {
	// Name says the rule in a few words; Fix says what to do instead.
	Name, Fix string
	From      func(pkg string) bool
	To        func(imp string) bool
}

// under reports whether pkg is dir or below it (module-relative).
func under(dirs ...string) func(string) bool {
	return func(pkg string) bool {
		for _, d := range dirs {
			if pkg == d || strings.HasPrefix(pkg, d+"/") {
				return true
			}
		}
		return false
	}
}

func not(f func(string) bool) func(string) bool { return func(s string) bool { return !f(s) } }

// Rules are the project's boundaries (docs/architecture.md): the sim knows
// router and engine internals and nothing of the suite; only the sim's
// target adapter, its standalone program and the API-server tier run it;
// the targets know nothing of the assertions, the specs or the report;
// the shared helpers know nothing of the project; and every layer imports
// only the layers below it.
var Rules = append(named, layerRules()...)

// named are the boundaries the project states by name; they come first, so
// an import that breaks one is reported under it, not the layer rule.
var named = []Rule{
	{
		Name: "sim/ imports only api/ and sim/",
		Fix:  "the sim knows nothing of the suite: move the shared fact to api/, or convert in the adapter clusters/sim",
		From: under("sim"),
		To:   not(under("sim", "api")),
	},
	{
		Name: "only clusters/sim, cmd/routing-sim, docs/ and the API-server tier import sim/",
		Fix:  "reach the sim through the Cluster seam (clusters/sim); docs/ only renders the sim's tables into its pages",
		From: not(under("sim", "clusters/sim", "cmd/routing-sim", "docs", "test/apiserver")),
		To:   under("sim"),
	},
	{
		Name: "clusters/ never imports assertions/, suites/ or report/",
		Fix:  "a target reports what a user observes; deciding, specs and reporting live above it",
		From: under("clusters"),
		To:   under("assertions", "suites", "report"),
	},
	{
		Name: "internal/ansi, yamlbind, exposition and progress import nothing of the project",
		Fix:  "every layer uses these helpers, so they sit below all of them: keep project facts out, or move the code to the layer that knows them",
		From: under(Helpers...),
		To:   func(string) bool { return true },
	},
}

// Helpers are the leaf packages under internal/ that any layer may import.
var Helpers = []string{"internal/ansi", "internal/yamlbind", "internal/exposition", "internal/progress"}

// Layer is one floor of the project (docs/architecture.md#layers): its
// packages import only the layers listed after it, and their own.
type Layer struct {
	Name string
	Dirs []string
}

// Layers from the top down. A package belongs to the layer whose folder
// is the longest match of its path, so clusters/sim is a target and
// clusters the seam.
var Layers = []Layer{
	{"the runner and tools", []string{"cmd", "internal/suiterun", "internal/eppdiff", "hack", "docs", "bench", "test/apiserver"}},
	{"the specs", []string{"suites"}},
	{"the evidence", []string{"assertions", "traffic", "fixtures", "report"}},
	{"the targets", []string{"clusters/kube", "clusters/kind", "clusters/sim"}},
	{"the seam", []string{"clusters"}},
	{"the measures", []string{"metrics", "config"}},
	{"the sim", []string{"sim"}},
	{"the ground", []string{"api"}},
	{"the helpers", Helpers},
}

// layerOf is the index in Layers of pkg's layer, or -1 for none.
func layerOf(pkg string) int {
	best, at := -1, -1
	for i, l := range Layers {
		for _, d := range l.Dirs {
			if (pkg == d || strings.HasPrefix(pkg, d+"/")) && len(d) > best {
				best, at = len(d), i
			}
		}
	}
	return at
}

// layerRules says, for each layer, that it imports no layer above it.
func layerRules() []Rule {
	var rs []Rule
	for i, l := range Layers {
		rs = append(rs, Rule{
			Name: fmt.Sprintf("%s (%s) import only the layers below them", l.Name, strings.Join(l.Dirs, ", ")),
			Fix:  "move what both need down to a layer both may import, or let the lower layer declare an interface the upper one implements",
			From: func(pkg string) bool { return layerOf(pkg) == i },
			To:   func(imp string) bool { j := layerOf(imp); return j >= 0 && j < i },
		})
	}
	return rs
}
