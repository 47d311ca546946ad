package report

import (
	"bytes"
	"html/template"
	"strings"
)

// HTML renders qualification.html: one self-contained page (inline CSS and
// SVG, no scripts, no network assets).
func HTML(r *Report) (string, error) {
	var b bytes.Buffer
	if err := page.Execute(&b, htmlData{Report: r, Env: envRows(r)}); err != nil {
		return "", err
	}
	return b.String(), nil
}

type htmlData struct {
	*Report
	Env [][2]string
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"chart": func(s SplitResult) template.HTML {
		// chartSVG escapes every text it writes.
		return template.HTML(chartSVG(s.Split)) //nolint:gosec
	},
	"sweep": func(s SweepResult) template.HTML {
		// sweepSVG escapes every text it writes.
		return template.HTML(sweepSVG(s.Sweep)) //nolint:gosec
	},
	"kind": kindNote,
	"cls":  resultClass,
	"join": strings.Join,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Routing qualification: {{.Result}}</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 8px 0 20px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 13px; }
th { background: #f2f2f2; }
.pass { background: #d7f0d2; font-weight: bold; }
.fail { background: #f7d4d4; font-weight: bold; }
.skip { background: #f3ecd0; }
.notrun { background: #e8e8e8; }
.reason { white-space: pre-wrap; font-family: monospace; font-size: 12px; }
.chart { display: block; margin: 6px 0 2px; }
.note { font-size: 11px; color: #555; margin-bottom: 8px; }
h1 span { padding: 2px 10px; }
</style>
</head>
<body>
<h1>Routing qualification: <span class="{{cls .Result}}">{{.Result}}</span></h1>
<h2>Environment</h2>
<table>{{range .Env}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>
<p>Specs: {{.Statistics.Passed}} passed, {{.Statistics.Failed}} failed, {{.Statistics.Skipped}} skipped ({{.Statistics.Total}} in all); wall time {{.WallTime}}.</p>
{{if .SuiteFailures}}<h3>Suite failures</h3><ul>{{range .SuiteFailures}}<li class="reason">{{.}}</li>{{end}}</ul>{{end}}
<h2>Documented claims</h2>
{{range .Claims}}
<h3 id="claim-{{.Name}}">{{.Title}}{{kind .Kind}}: <span class="{{cls .Result}}">{{.Result}}</span></h3>
<p>Source: {{.Source}}</p>
<table>
<tr><th>Pair</th><th>Documented</th><th>Measured</th><th>Result</th><th>Reason</th></tr>
{{range .Rows}}<tr><td>{{.Pair}}</td><td>{{.Expected}}</td><td>{{range .Measured}}<div>{{.}}</div>{{end}}{{range .Splits}}{{chart .}}<div class="note">{{.Requests}} requests, {{.Failures}} failed, counted by <code>{{.Source}}</code></div>{{end}}</td><td class="{{cls .Result}}">{{.Result}}</td><td class="reason">{{join .Reasons "\n"}}</td></tr>
{{end}}</table>
{{end}}
{{if .OtherSplits}}<h2>Other measured splits</h2>
{{range .OtherSplits}}<div class="split">
<p><b>{{.Pair}}</b>, {{.Title}}: {{.Counts}} by <code>{{.Source}}</code>; {{.Requests}} requests, {{.Failures}} failed; documented: {{.Expected}}; <span class="{{cls .Result}}">{{.Result}}</span></p>
{{chart .}}
</div>{{end}}{{end}}
{{if .Sweeps}}<h2>Concurrency sweeps</h2>
{{range .Sweeps}}<div class="sweep">
<p><b>{{.Pair}}</b>, {{.Title}}: by <code>{{.Source}}</code>; expected: {{.Expected}}; <span class="{{cls .Result}}">{{.Result}}</span></p>
{{sweep .}}
<table>
<tr><th>Concurrency</th><th>Split</th><th>Failed</th><th>Latency p50/p95/p99 ms</th><th>TTFT p50/p95/p99 ms</th></tr>
{{range .Levels}}<tr><td>{{.Concurrency}}</td><td>{{.Counts}}</td><td>{{.Failures}} of {{.Requests}}</td><td>{{.Latency}}</td><td>{{.TTFT}}</td></tr>
{{end}}</table>
</div>{{end}}{{end}}
<h2>Specs</h2>
<table>
<tr><th>Spec</th><th>Result</th><th>Time</th><th>Reason and evidence</th></tr>
{{range .Specs}}<tr><td>{{.Name}}</td><td class="{{cls .Result}}">{{.Result}}</td><td>{{printf "%.2fs" .RunTimeSeconds}}</td><td class="reason">{{.Reason}}{{if .Location}} ({{.Location}}){{end}}{{range .Entries}}
{{.}}{{end}}</td></tr>
{{end}}</table>
</body>
</html>
`))

// resultClass is the CSS class of a result cell.
func resultClass(result string) string {
	switch result {
	case ResultPass:
		return "pass"
	case ResultFail:
		return "fail"
	case ResultSkip:
		return "skip"
	}
	return "notrun"
}
