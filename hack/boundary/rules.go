package main

import "strings"

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
// the shared helpers know nothing of the project.
var Rules = []Rule{
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
