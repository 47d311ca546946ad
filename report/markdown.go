package report

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/fixtures"
)

// Markdown renders qualification.md.
func Markdown(r *Report) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Routing qualification: %s\n\n", r.Result)
	p("## Environment\n\n")
	p("| | |\n|---|---|\n")
	for _, kv := range envRows(r) {
		p("| %s | %s |\n", kv[0], mdCell(kv[1]))
	}
	p("\n")
	st := r.Statistics
	p("Specs: %d passed, %d failed, %d skipped (%d in all); wall time %s.\n\n", st.Passed, st.Failed, st.Skipped, st.Total, r.WallTime)
	if len(r.SuiteFailures) > 0 {
		p("**Suite failures:**\n\n")
		for _, f := range r.SuiteFailures {
			p("- %s\n", mdCell(f))
		}
		p("\n")
	}
	p("## Documented claims\n\n")
	for _, c := range r.Claims {
		p("### %s%s: %s\n\n", c.Title, kindNote(c.Kind), c.Result)
		p("Source: %s\n\n", c.Source)
		p("| Pair | Documented | Measured | Result | Reason |\n|---|---|---|---|---|\n")
		for _, row := range c.Rows {
			p("| %s | %s | %s | %s | %s |\n", row.Pair, mdCell(row.Expected), mdCell(strings.Join(row.Measured, "; ")),
				row.Result, mdCell(strings.Join(row.Reasons, "; ")))
		}
		p("\n")
		for _, row := range c.Rows {
			for _, s := range row.Splits {
				p("**%s**, %s: %s by `%s`; %d requests, %d failed; documented: %s; %s\n\n", s.Pair, s.Title, s.Counts(), s.Source, s.Requests, s.Failures, s.Expected, s.Result)
				p("%s\n", textBars(s.Split))
			}
		}
	}
	if len(r.OtherSplits) > 0 {
		p("## Other measured splits\n\n")
		for _, s := range r.OtherSplits {
			p("**%s**, %s: %s by `%s`; %d requests, %d failed; documented: %s; %s\n\n", s.Pair, s.Title, s.Counts(), s.Source, s.Requests, s.Failures, s.Expected, s.Result)
			p("%s\n", textBars(s.Split))
		}
	}
	if len(r.Sweeps) > 0 {
		p("## Concurrency sweeps\n\n")
		for _, s := range r.Sweeps {
			p("%s\n", sweepMarkdown(s))
		}
	}
	p("## Specs\n\n| Spec | Result | Time | Reason |\n|---|---|---|---|\n")
	for _, s := range r.Specs {
		reason := s.Reason
		if s.Location != "" {
			reason += " (" + s.Location + ")"
		}
		p("| %s | %s | %.2fs | %s |\n", mdCell(s.Name), s.Result, s.RunTimeSeconds, mdCell(reason))
	}
	return b.String()
}

func envRows(r *Report) [][2]string {
	e := r.Environment
	rows := [][2]string{{"Target", e.Target}}
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, [2]string{k, v})
		}
	}
	add("Kubernetes", e.KubernetesVersion)
	add("Operator", e.OperatorVersion)
	gpu := e.GPU
	if gpu == "" {
		gpu = "none reported by the target"
	}
	add("GPU", gpu)
	add("Model", e.Model)
	add("Router image", e.RouterImage)
	for _, en := range e.Engines {
		v := en.Version
		if en.Image != "" {
			v += " (" + en.Image + ")"
		}
		add("Engine "+en.Name, v)
	}
	add("Routers", strings.Join(e.Routers, ", "))
	if e.Replicas > 0 {
		add("Replicas", fmt.Sprint(e.Replicas))
	}
	if e.Requests > 0 {
		add("Requests per split", fmt.Sprint(e.Requests))
	}
	add("Started", r.StartTime.Format("2006-01-02 15:04:05 UTC"))
	add("Wall time", r.WallTime)
	add("Ginkgo processes", fmt.Sprint(e.GinkgoNodes))
	add("Label filter", e.LabelFilter)
	add("Random seed", fmt.Sprint(e.RandomSeed))
	add("Config", e.ConfigFile)
	rows = append(rows, costRows(e.Cost)...)
	for _, n := range e.Notes {
		add("Note", n)
	}
	return rows
}

// costRows are the cost figures, or why they are missing.
func costRows(c CostSummary) [][2]string {
	rows := [][2]string{{"ModelDeployments created", fmt.Sprint(c.ModelDeployments)}}
	if c.EnginePodsStarted == nil {
		why := fmt.Sprintf("not counted: the target counted %d of %d deployments (%s)", c.Counted, c.ModelDeployments, strings.Join(c.NotCounted, "; "))
		return append(rows, [2]string{"Engine Pods, accelerator-seconds", why})
	}
	return append(rows,
		[2]string{"Engine Pods started", fmt.Sprint(*c.EnginePodsStarted)},
		[2]string{"Engine Pods Ready", fmt.Sprint(*c.EnginePodsReady)},
		[2]string{"Accelerator-seconds", formatNumber(*c.AcceleratorSeconds) + " (engine Pods, Ready to deleted, times accelerators)"})
}

// mdCell keeps a value inside one Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "<br>")
}

// kindNote marks an extended or resilience claim's title: its expected
// column is derived, not documented.
func kindNote(kind string) string {
	switch kind {
	case fixtures.KindExtended:
		return " (extended: expected outcome derived from the routers' algorithms)"
	case fixtures.KindResilience:
		return " (resilience: a fault injected mid-traffic; bounds derived from the routers' and the cluster's behaviour)"
	}
	return ""
}
