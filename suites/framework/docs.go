package framework

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/fixtures"
)

// The README's claims table and deployment table, and e2e.yaml's list of
// claim names, are written from the registry and its plan (make docs), and
// a suite's test checks they are current, so that none is kept by hand.

// ClaimsTable is the README's table of claims: one row per claim, its file
// and what it asserts, in expect.yaml's order. dir is the suite's package
// directory as the README names it (suites/routing).
func (r *Registry) ClaimsTable(dir string) string {
	var b strings.Builder
	b.WriteString("| claim | spec file | what is asserted |\n|---|---|---|\n")
	for _, c := range r.Claims() {
		what := c.Asserts
		var tags []string
		if c.Kind != "" && c.Kind != fixtures.KindDocumented {
			tags = append(tags, c.Kind)
		}
		if c.PD {
			tags = append(tags, "prefill/decode")
		}
		if len(tags) > 0 {
			what = "*" + tags[0] + "*" + strings.Join(append([]string{""}, tags[1:]...), ", ") + ": " + what
		}
		fmt.Fprintf(&b, "| `%s` | `%s/%s.go` | %s |\n", c.Name, dir, c.Name, what)
	}
	return b.String()
}

// DeploymentsTable is the README's table of the ModelDeployments a run
// creates on a target that runs every pair (the sim), in the order each
// pair's specs meet them, with the cases each serves and the router args
// each runs with, and the cost of running the documented claims, those
// and the extended ones, and every claim. replicas is the configured
// engine replicas of a server deployment.
func (r *Registry) DeploymentsTable(replicas int32) string {
	plan := r.Plan(nil, false)
	var b strings.Builder
	b.WriteString("| pair | ModelDeployment | created with | engine Pods | edits | cases, in the order they run, with the router args each runs with |\n|---|---|---|---|---|---|\n")
	for _, pp := range plan.Pairs {
		for _, u := range pp.Alone {
			if u.Own == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s | %s | 0 | %s, alone |\n",
				pp.Pair, u.Own.Name, argsWords(u.Own.Deployment.RouterArgs), podsWords(*u.Own, replicas), useWords(u))
		}
		for _, s := range pp.Shared {
			fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %d | %s |\n", pp.Pair, s.Name, argsWords(s.RouterArgs), podsWords(s.PlannedDeployment, replicas),
				s.Edits(), stepsWords(s.Steps()))
		}
	}
	b.WriteString("\n")
	kinds := func(ks ...string) func(Use) bool {
		return func(u Use) bool { return slices.Contains(ks, u.Claim.Kind) }
	}
	doc := plan.Only(kinds(fixtures.KindDocumented)).Cost(replicas)
	ext := plan.Only(kinds(fixtures.KindDocumented, fixtures.KindExtended)).Cost(replicas)
	all := plan.Cost(replicas)
	fmt.Fprintf(&b, "Cases that create nothing that runs (admission's refusals, a claim that does not apply to the pair) are not listed. "+
		"→ marks an edit of `spec.router.extraArgs` before the cases after it (a new router Pod, the same engine Pods); "+
		"a refused value is edited in and back. "+
		"With %d engine replicas per server deployment, the documented claims start %d engine Pods in %d ModelDeployments (%d edits); "+
		"the documented and extended claims %d in %d (%d edits); every claim, resilience included, %d in %d (%d edits).\n",
		replicas, doc.EnginePods, doc.ModelDeployments, doc.RouterEdits, ext.EnginePods, ext.ModelDeployments, ext.RouterEdits,
		all.EnginePods, all.ModelDeployments, all.RouterEdits)
	return b.String()
}

// stepsWords lists a shared deployment's steps: the uses in order, each
// edit of the args before the uses it serves, the refused values as
// edited in and back, and where the claims that edit or fault it begin.
func stepsWords(steps []Step) string {
	var parts []string
	for i, st := range steps {
		w := useWords(st.Use)
		if st.EditBack {
			w = fmt.Sprintf("%s edited in and back", w)
		}
		if st.Edit {
			w = "→ " + argsWords(st.Case.Deployment.RouterArgs) + ": " + w
		}
		if st.Claim.Mutates && (i == 0 || !steps[i-1].Claim.Mutates) {
			w = "then, editing or faulting it: " + w
		}
		parts = append(parts, w)
	}
	return strings.Join(parts, ", ")
}

func argsWords(args []string) string {
	if len(args) == 0 {
		return "the router's defaults"
	}
	return "`" + strings.Join(args, " ") + "`"
}

func podsWords(d PlannedDeployment, replicas int32) string {
	w := fmt.Sprint(d.EnginePods(replicas))
	if d.PD() {
		w = fmt.Sprintf("%d (%d prefill + %d decode)", d.EnginePods(replicas), d.Prefill, d.Decode)
	}
	if d.ExtraEnginePods > 0 {
		w += fmt.Sprintf(" + %d replacement", d.ExtraEnginePods)
	}
	return w
}

func useWords(u Use) string {
	if u.Case.Name == "" {
		return u.Claim.Name
	}
	return fmt.Sprintf("%s (`%s`)", u.Claim.Name, u.Case.Name)
}

// ClaimList is the claim names as a comma-separated list, wrapped at width
// characters after prefix on each line.
func (r *Registry) ClaimList(prefix string, width int) string {
	var lines []string
	line := prefix
	names := r.Names()
	for i, n := range names {
		w := n
		if i < len(names)-1 {
			w += ","
		}
		if line != prefix && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = prefix
		}
		if line != prefix {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n") + "\n"
}

// Block markers: a generated block sits between a line holding
// "BEGIN generated (make docs): <name>" and one holding
// "END generated: <name>", in whatever comment syntax the file uses.
func blockMarkers(name string) (string, string) {
	return "BEGIN generated (make docs): " + name, "END generated: " + name
}

// ReplaceBlock returns text with the lines between the markers of block
// name replaced by body; an error says which marker is missing.
func ReplaceBlock(text, name, body string) (string, error) {
	begin, end := blockMarkers(name)
	i := strings.Index(text, begin)
	if i < 0 {
		return "", fmt.Errorf("no line with %q", begin)
	}
	i += strings.Index(text[i:], "\n") + 1
	j := strings.Index(text[i:], end)
	if j < 0 {
		return "", fmt.Errorf("no line with %q after %q", end, begin)
	}
	j = i + j
	j = strings.LastIndex(text[:j], "\n") + 1
	return text[:i] + body + text[j:], nil
}
