package report

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/fixtures"
)

// Marks put a shape before each result, so a cell reads without its colour.
var marks = map[string]string{
	ResultPass:          "✓",
	ResultFail:          "✗",
	ResultSkip:          "○",
	ResultNotApplicable: "–",
	ResultNotRun:        "·",
}

// marked is a result with its shape, e.g. "✓ PASS".
func marked(result string) string {
	if m, ok := marks[result]; ok {
		return m + " " + result
	}
	return result
}

// Column headings that keep the docs' figures apart from this run's.
const (
	colDocs     = "Operator docs say (their GPU run)"
	colDerived  = "Expected (derived, not documented)"
	colStated   = "Expected (stated by the suite)"
	colBound    = "Expected, with derived bounds"
	colMeasured = "This run measured"
	legend      = "✓ PASS, ✗ FAIL, ○ SKIP (could not run here; the reason is listed), – N/A (the claim does not apply to the pair, as expect.yaml records from the docs or the router's flags; the reason is listed), · NOT RUN (no spec ran: not selected in this run, or none for the pair)"
)

// Markdown renders qualification.md from r alone.
func Markdown(r *Report) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# %s\n\n", r.Headline)
	p("Result: **%s** (%s); wall time %s; report schema %d.\n\n", r.Result, r.Outcome, r.WallTime, r.SchemaVersion)
	if len(r.SuiteFailures) > 0 {
		p("## Suite-level failures\n\n")
		for _, f := range r.SuiteFailures {
			p("- %s\n", mdCell(f))
		}
		p("\n")
	}
	if r.Baseline != nil {
		markdownDiff(&b, r.Baseline)
	}

	p("## Claims × pairs\n\n| Claim | Kind |")
	for _, pair := range r.Pairs {
		p(" %s |", pair)
	}
	p("\n|---|---|%s\n", strings.Repeat("---|", len(r.Pairs)))
	for _, c := range r.Claims {
		p("| [%s](#%s) | %s |", mdCell(c.Title), c.Anchor, c.Kind)
		for _, row := range c.Rows {
			p(" [%s](#%s) |", marked(row.Result), row.Anchor)
		}
		p("\n")
	}
	p("\n%s\n\n", legend)
	p("## Verdict per pair\n\n")
	for _, v := range r.Verdicts {
		p("- %s\n", mdCell(v.Line))
	}
	p("\n")

	problems := failuresAndSkips(r)
	p("## Failures and skips (%d)\n\n", len(problems))
	if len(problems) == 0 {
		p("None.\n\n")
	} else {
		p("| Result | Claim | Pair | Spec | Reason |\n|---|---|---|---|---|\n")
		for _, s := range problems {
			p("| %s | %s | %s | %s | %s |\n", marked(s.Result), s.Claim, s.Pair, mdCell(s.Text), mdCell(s.Reason))
		}
		p("\n")
	}

	p("## Environment\n\n| | |\n|---|---|\n")
	for _, kv := range r.Environment.Block {
		p("| %s | %s |\n", kv.Name, mdCell(kv.Value))
	}
	p("\n")

	p("## Claims\n\n")
	for _, c := range r.Claims {
		p("<a id=\"%s\"></a>\n\n### %s%s: %s\n\n", c.Anchor, c.Title, kindNote(c.Kind), marked(c.Result))
		p("Sources: %s\n\n", strings.Join(mdLinks(c.Sources, r.linkBase), ", "))
		p("| Pair | %s | %s | Result | Reason |\n|---|---|---|---|---|\n", expectedColumn(c.Kind), colMeasured)
		for _, row := range c.Rows {
			p("| <a id=\"%s\"></a>%s | %s | %s | %s | %s |\n", row.Anchor, row.Pair, mdCell(row.Expected), mdCell(strings.Join(row.Measured, "; ")),
				marked(row.Result), mdCell(strings.Join(row.Reasons, "; ")))
		}
		p("\n")
		for _, row := range c.Rows {
			for _, ch := range row.Charts {
				p("**%s**\n\n%s", ch.Title, ch.Text())
				if ch.Caption != "" {
					p("%s\n", ch.Caption)
				}
				p("\n")
			}
			if len(row.Evidence) > 0 {
				p("<details><summary>%s: evidence (%d lines)</summary>\n\n```\n%s\n```\n\n</details>\n\n", row.Pair, len(row.Evidence), strings.Join(row.Evidence, "\n"))
			}
		}
	}
	if len(r.OtherSplits) > 0 {
		p("## Other measured splits\n\n")
		for _, s := range r.OtherSplits {
			for _, ch := range s.Charts() {
				p("**%s** (%s)\n\n%s%s\n\n", ch.Title, s.Result, ch.Text(), ch.Caption)
			}
		}
	}
	if len(r.Sweeps) > 0 {
		p("## Concurrency sweeps\n\n%s\n\n", r.DriverBoundNote())
		for _, s := range r.Sweeps {
			p("%s\n", sweepMarkdown(s))
		}
	}
	p("## Specs\n\n<details><summary>All %d specs with their time and reason</summary>\n\n", len(r.Specs))
	p("| Spec | Result | Time | Reason |\n|---|---|---|---|\n")
	for _, s := range r.Specs {
		reason := s.Reason
		if s.Location != "" {
			reason += " (" + s.Location + ")"
		}
		p("| %s | %s | %.2fs | %s |\n", mdCell(s.Name), marked(s.Result), s.RunTimeSeconds, mdCell(reason))
	}
	p("\n</details>\n")
	return b.String()
}

func markdownDiff(b *strings.Builder, d *Diff) {
	fmt.Fprintf(b, "## Changes since the baseline\n\nBaseline: %s — %s\n\n", d.Baseline, d.BaselineHeadline)
	fmt.Fprintf(b, "Splits are compared as per-replica shares, largest first; one is listed when a share moved by more than %.0f percentage points. Metric series are compared by name and label names, per claim and pair.\n\n", 100*d.Tolerance)
	if d.Empty() {
		b.WriteString("No change.\n\n")
		return
	}
	section := ""
	for _, l := range diffLines(d) {
		if l[0] != section {
			section = l[0]
			fmt.Fprintf(b, "\n**%s**\n\n", section)
		}
		fmt.Fprintf(b, "- %s\n", mdCell(l[1]))
	}
	b.WriteString("\n")
}

// failuresAndSkips are the specs that did not pass, failures first: each
// with its one-line reason.
func failuresAndSkips(r *Report) []SpecResult {
	var fails, skips []SpecResult
	for _, s := range r.Specs {
		switch s.Result {
		case ResultFail:
			fails = append(fails, s)
		case ResultPass:
		default:
			skips = append(skips, s)
		}
	}
	return append(fails, skips...)
}

// docLink is the target of a docs/ source, relative to where the report is.
func docLink(source, base string) string {
	if strings.HasPrefix(source, "docs/") {
		return base + source
	}
	return source
}

func mdLinks(sources []string, base string) []string {
	out := make([]string, len(sources))
	for i, s := range sources {
		out[i] = fmt.Sprintf("[%s](%s)", s, docLink(s, base))
	}
	return out
}

// mdCell keeps a value inside one Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "<br>")
}

// kindNote marks a claim's title with what its expected column rests on:
// nothing for a documented claim (the column heading says it), the
// derivation for an extended one, the fault and its bounds for a
// resilience one, the kind's name for any other.
func kindNote(kind string) string {
	switch kind {
	case fixtures.KindDocumented, "":
		return ""
	case fixtures.KindExtended:
		return " (extended: expected outcome derived from the routers' algorithms)"
	case fixtures.KindResilience:
		return " (resilience: a fault injected mid-traffic; bounds derived from the routers' and the cluster's behaviour)"
	}
	return " (" + kind + ": expected outcome and bounds stated by the suite)"
}

// expectedColumn heads a claim table's expected column, so the docs'
// figures (their GPU run) are never read as this run's, nor a derived or
// stated expectation as documented.
func expectedColumn(kind string) string {
	switch kind {
	case fixtures.KindDocumented, "":
		return colDocs
	case fixtures.KindExtended:
		return colDerived
	case fixtures.KindResilience:
		return colBound
	}
	return colStated
}
