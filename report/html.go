package report

import (
	"bytes"
	"html/template"
	"strings"
)

// Colours of the page, from the Okabe-Ito palette (distinguishable with
// the common colour-vision deficiencies); every result also carries its
// shape and its word, so no cell relies on colour alone. check-render.sh
// looks for these in a headless screenshot.
const (
	ColourPass          = "#009e73" // bluish green
	ColourFail          = "#d55e00" // vermillion
	ColourSkip          = "#f0e442" // yellow
	ColourNotApplicable = "#dddddd"
	ColourNotRun        = "#ffffff"
	// ColourHeadline is the headline's background, whatever the outcome;
	// its left border takes the outcome's colour.
	ColourHeadline = "#e3eef8"
	// ColourInterrupted marks a headline for a run that did not finish.
	ColourInterrupted = "#e69f00" // orange
	// ColourMatrixFrame frames the matrix, and nothing else, so a
	// screenshot check can find the matrix's cells.
	ColourMatrixFrame = "#56b4e9" // sky blue
)

// HTML renders qualification.html from r alone: one self-contained page
// (inline CSS and SVG, no scripts, links only to its own sections and to
// the repository's docs/).
func HTML(r *Report) (string, error) {
	var b bytes.Buffer
	data := htmlData{Report: r, Problems: failuresAndSkips(r)}
	if r.Baseline != nil {
		data.Diff = diffLines(r.Baseline)
	}
	if err := page.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

type htmlData struct {
	*Report
	Problems []SpecResult
	Diff     [][2]string
}

func (d htmlData) Legend() string { return legend }
func (d htmlData) ColMeasured() string {
	return colMeasured
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"chart": func(c Chart) template.HTML {
		// Chart.SVG escapes every text it writes.
		return template.HTML(c.SVG()) //nolint:gosec
	},
	"cls":    resultClass,
	"marked": marked,
	"join":   strings.Join,
	"doc": func(base, source string) string {
		return docLink(source, base)
	},
	"pct":  func(f float64) int { return int(100*f + 0.5) },
	"vcls": func(v string) string { return strings.ToLower(strings.ReplaceAll(v, " ", "-")) },
	"sweep": func(s SweepResult) template.HTML {
		// sweepSVG escapes every text it writes.
		return template.HTML(sweepSVG(s.Sweep)) //nolint:gosec
	},
	"kind":     kindNote,
	"expected": expectedColumn,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Headline}}</title>
<style>
body { font-family: "DejaVu Sans", sans-serif; margin: 24px; color: #111; max-width: 1200px; }
table { border-collapse: collapse; margin: 8px 0 20px; }
th, td { border: 1px solid #bbb; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 13px; }
th { background: #f2f2f2; }
a { color: #0b4f8a; }
.headline { background: ` + ColourHeadline + `; border-left: 14px solid #888; padding: 12px 18px; margin-bottom: 16px; }
.headline h1 { font-size: 24px; margin: 0 0 6px; line-height: 1.3; color: #000; }
.headline p { margin: 0; font-size: 14px; }
.outcome-passed { border-left-color: ` + ColourPass + `; }
.outcome-failed, .outcome-did-not-run { border-left-color: ` + ColourFail + `; }
.outcome-interrupted { border-left-color: ` + ColourInterrupted + `; }
.pass { background: ` + ColourPass + `; color: #000; font-weight: bold; }
.fail { background: ` + ColourFail + `; color: #000; font-weight: bold; }
.skip { background: ` + ColourSkip + `; color: #000; }
.na { background: ` + ColourNotApplicable + `; color: #222; }
.notrun { background: ` + ColourNotRun + `; color: #222; border-style: dashed; }
table.matrix { border: 4px solid ` + ColourMatrixFrame + `; }
table.matrix td.cell { min-width: 150px; height: 28px; padding: 0; text-align: center; font-size: 14px; }
table.matrix td.cell a { display: block; padding: 6px 8px; color: inherit; text-decoration: none; }
table.matrix th.claim { min-width: 260px; }
.legend { font-size: 12px; color: #333; }
.lines { white-space: pre-wrap; }
.reason { white-space: pre-wrap; font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
.suite-failures li { white-space: pre-wrap; font-family: "DejaVu Sans Mono", monospace; font-size: 13px; margin-bottom: 6px; }
.charts { display: flex; flex-wrap: wrap; gap: 8px 28px; }
.chart { display: block; margin: 6px 0 2px; }
td.pass, td.fail, td.skip, td.na, td.notrun, td.pair { white-space: nowrap; }
.caption { font-size: 11px; color: #444; margin-bottom: 10px; }
details { margin: 4px 0 10px; }
summary { cursor: pointer; font-size: 13px; color: #0b4f8a; }
pre.evidence { white-space: pre-wrap; font-size: 12px; background: #f7f7f7; padding: 6px; margin: 4px 0; }
</style>
</head>
<body>
<header class="headline outcome-{{.Outcome}}" id="headline">
<h1>{{.Headline}}</h1>
<p>Result: <b>{{.Result}}</b> ({{.Outcome}}); wall time {{.WallTime}}; report schema {{.SchemaVersion}}.</p>
</header>
{{if .SuiteFailures}}<section class="suite-failures"><h2>Suite-level failures</h2><ul>{{range .SuiteFailures}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
{{with .Baseline}}<section id="baseline"><h2>Changes since the baseline</h2>
<p>Baseline: {{.Baseline}} — {{.BaselineHeadline}}</p>
<p class="legend">Splits are compared as per-replica shares, largest first; one is listed when a share moved by more than {{pct .Tolerance}} percentage points. Metric series are compared by name and label names, per claim and pair.</p>
{{if $.Diff}}<table>{{range $.Diff}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>{{else}}<p>No change.</p>{{end}}
</section>{{end}}
<h2>Claims × pairs</h2>
<table class="matrix" id="matrix">
<tr><th class="claim">Claim</th><th>Kind</th>{{range .Pairs}}<th>{{.}}</th>{{end}}</tr>
{{range .Claims}}<tr><th class="claim"><a href="#{{.Anchor}}">{{.Title}}</a></th><td>{{.Kind}}</td>{{range .Rows}}<td class="cell {{cls .Result}}" title="{{.Pair}}: {{.Result}}{{range .Reasons}} — {{.}}{{end}}"><a href="#{{.Anchor}}">{{marked .Result}}</a></td>{{end}}</tr>
{{end}}</table>
<p class="legend">{{.Legend}}</p>
<h2>Verdict per pair</h2>
<ul class="verdicts">{{range .Verdicts}}<li class="verdict-{{vcls .Result}}">{{.Line}}</li>{{end}}</ul>
<h2>Failures and skips ({{len .Problems}})</h2>
{{if .Problems}}<table>
<tr><th>Result</th><th>Claim</th><th>Pair</th><th>Spec</th><th>Reason</th></tr>
{{range .Problems}}<tr><td class="{{cls .Result}}">{{marked .Result}}</td><td>{{.Claim}}</td><td class="pair">{{.Pair}}</td><td>{{.Text}}</td><td class="reason">{{.Reason}}</td></tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}
<h2>Environment</h2>
<table>{{range .Environment.Block}}<tr><th>{{.Name}}</th><td class="lines">{{.Value}}</td></tr>{{end}}</table>
<h2>Claims</h2>
{{range .Claims}}
<h3 id="{{.Anchor}}">{{.Title}}{{kind .Kind}}: <span class="{{cls .Result}}">{{marked .Result}}</span></h3>
<p>Sources: {{range $i, $s := .Sources}}{{if $i}}, {{end}}<a href="{{doc $.Report.LinkBase $s}}">{{$s}}</a>{{end}}</p>
<table>
<tr><th>Pair</th><th>{{expected .Kind}}</th><th>{{$.ColMeasured}}</th><th>Result</th><th>Reason</th></tr>
{{range .Rows}}<tr id="{{.Anchor}}"><td class="pair">{{.Pair}}</td><td>{{.Expected}}</td><td>{{range .Measured}}<div>{{.}}</div>{{end}}</td><td class="{{cls .Result}}">{{marked .Result}}</td><td class="reason">{{join .Reasons "\n"}}</td></tr>
{{end}}</table>
<div class="charts">{{range .Rows}}{{range .Charts}}<div>{{chart .}}{{if .Caption}}<div class="caption">{{.Caption}}</div>{{end}}</div>{{end}}{{end}}</div>
{{range .Rows}}{{if .Evidence}}<details><summary>{{.Pair}}: evidence ({{len .Evidence}} lines)</summary><pre class="evidence">{{join .Evidence "\n"}}</pre></details>{{end}}{{end}}
{{end}}
{{if .OtherSplits}}<h2>Other measured splits</h2>
{{range .OtherSplits}}{{range .Charts}}{{chart .}}<div class="caption">{{.Caption}}</div>{{end}}{{end}}{{end}}
{{if .Sweeps}}<h2>Concurrency sweeps</h2>
<p class="bound">{{$.DriverBoundNote}}</p>
{{range .Sweeps}}<div class="sweep">
<p><b>{{.Pair}}</b>, {{.Title}}: by <code>{{.Source}}</code>; expected: {{.Expected}}; <span class="{{cls .Result}}">{{marked .Result}}</span></p>
{{sweep .}}
<table>
<tr><th>Concurrency</th><th>Split</th><th>Failed</th><th>Latency p50/p95/p99 ms</th><th>TTFT p50/p95/p99 ms</th><th>Driver overhead bound ms (TTFT / latency)</th></tr>
{{range .Levels}}<tr><td>{{.Concurrency}}</td><td>{{.Counts}}</td><td>{{.Failures}} of {{.Requests}}</td><td>{{.Latency}}</td><td>{{.TTFT}}</td><td>{{.DriverBound}}</td></tr>
{{end}}</table>
</div>{{end}}{{end}}
<h2>Specs</h2>
<details><summary>All {{len .Specs}} specs with their time, reason and evidence</summary>
<table>
<tr><th>Spec</th><th>Result</th><th>Time</th><th>Reason and evidence</th></tr>
{{range .Specs}}<tr><td>{{.Name}}</td><td class="{{cls .Result}}">{{marked .Result}}</td><td>{{printf "%.2fs" .RunTimeSeconds}}</td><td class="reason">{{.Reason}}{{if .Location}} ({{.Location}}){{end}}{{if .Failure}}<details><summary>failure message</summary>{{.Failure}}</details>{{end}}{{if .Entries}}<details><summary>{{len .Entries}} evidence lines</summary>{{join .Entries "\n"}}</details>{{end}}</td></tr>
{{end}}</table>
</details>
</body>
</html>
`))

// LinkBase is what docs/ links are prefixed with on this page.
func (r *Report) LinkBase() string { return r.linkBase }

// resultClass is the CSS class of a result cell.
func resultClass(result string) string {
	switch result {
	case ResultPass:
		return "pass"
	case ResultFail:
		return "fail"
	case ResultSkip:
		return "skip"
	case ResultNotApplicable:
		return "na"
	}
	return "notrun"
}
