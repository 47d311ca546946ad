// Package eppdiff compares two runs of the llm-d claims on the sim, one with
// the emulated endpoint picker and one with llm-d-router's built EPP (make
// test-upstream-llmd), row by row: every claim × llm-d pair must have the
// same result on both, or be a row of Known, which says why with evidence
// and a citation. Splits are set side by side for reading; the claims
// already judge the ones they assert, and a split the claim only records
// (or one a random tie-break decides) may move between any two runs.
package eppdiff

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/report"
)

// Row is one claim × pair of the comparison.
type Row struct {
	Claim, Pair        string
	Emulated, Upstream string // the cells' results
	// EmulatedMeasured and UpstreamMeasured are the cells' first measured line.
	EmulatedMeasured, UpstreamMeasured string
	// Splits are the row's splits, emulated → upstream, in the runs' order.
	Splits []SplitPair
	// Known is the known difference that explains a differing result.
	Known *Difference
}

// SplitPair is one split measured in both runs.
type SplitPair struct {
	Title              string
	Emulated, Upstream string // counts, e.g. "60/60"
}

// Agrees reports whether the row's results are the same.
func (r Row) Agrees() bool { return r.Emulated == r.Upstream }

// Comparison is the whole differential.
type Comparison struct {
	Rows []Row
	// Unexplained are the rows whose results differ with no Known row.
	Unexplained []Row
	// Stale are Known rows whose difference did not occur.
	Stale []Difference
}

// Compare lines up the llm-d rows of two reports. It refuses reports that
// are not what they claim to be: the emulated run must name the emulated
// EPP and the upstream run the built one for every llm-d pair, since a
// differential of a run against itself would agree trivially.
func Compare(emulated, upstream *report.Report, known []Difference) (*Comparison, error) {
	if err := checkEPP(emulated, clusters.RouterEmulated); err != nil {
		return nil, fmt.Errorf("the emulated run: %w", err)
	}
	if err := checkEPP(upstream, clusters.RouterBuilt); err != nil {
		return nil, fmt.Errorf("the upstream run: %w", err)
	}
	up := cells(upstream)
	c := &Comparison{}
	used := make([]bool, len(known))
	for _, claim := range emulated.Claims {
		for _, er := range claim.Rows {
			if !isLLMD(er.Pair) {
				continue
			}
			ur, ok := up[claim.Name+" / "+er.Pair]
			if !ok {
				return nil, fmt.Errorf("%s / %s is in the emulated run's report and not in the upstream run's", claim.Name, er.Pair)
			}
			row := Row{Claim: claim.Name, Pair: er.Pair, Emulated: er.Result, Upstream: ur.Result,
				EmulatedMeasured: first(er.Measured), UpstreamMeasured: first(ur.Measured), Splits: splits(er.Splits, ur.Splits)}
			if !row.Agrees() {
				i := slices.IndexFunc(known, func(d Difference) bool { return d.Claim == row.Claim && d.Pair == row.Pair })
				if i < 0 {
					c.Unexplained = append(c.Unexplained, row)
				} else {
					used[i], row.Known = true, &known[i]
				}
			}
			c.Rows = append(c.Rows, row)
		}
	}
	for i, d := range known {
		if !used[i] {
			c.Stale = append(c.Stale, d)
		}
	}
	return c, nil
}

// Err is nil when every row agrees or is explained and every known row
// still occurs; otherwise it names each offending row.
func (c *Comparison) Err() error {
	var lines []string
	for _, r := range c.Unexplained {
		lines = append(lines, fmt.Sprintf("%s / %s: %s on the emulated EPP, %s on llm-d's (emulated: %s; llm-d's: %s); fix the emulation, or add a row to eppdiff.Known with the evidence and its source",
			r.Claim, r.Pair, r.Emulated, r.Upstream, r.EmulatedMeasured, r.UpstreamMeasured))
	}
	for _, d := range c.Stale {
		lines = append(lines, fmt.Sprintf("%s / %s: eppdiff.Known says the results differ, and they did not in this run; remove the row or say why it depends on the run", d.Claim, d.Pair))
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("%d row(s) of the differential:\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// Markdown renders the comparison, a row per claim × pair with a result.
func (c *Comparison) Markdown() string {
	var b strings.Builder
	b.WriteString("| claim | pair | emulated EPP | llm-d's EPP | splits (emulated → llm-d's) | note |\n|---|---|---|---|---|---|\n")
	for _, r := range c.Rows {
		if r.Emulated == report.ResultNotApplicable && r.Upstream == report.ResultNotApplicable {
			continue
		}
		var sp []string
		for _, s := range r.Splits {
			sp = append(sp, fmt.Sprintf("%s: %s → %s", s.Title, s.Emulated, s.Upstream))
		}
		note := ""
		switch {
		case r.Known != nil:
			note = "known: " + r.Known.Why
		case !r.Agrees():
			note = "**unexplained**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Claim, r.Pair, r.Emulated, r.Upstream, cell(strings.Join(sp, "; ")), cell(note))
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func checkEPP(r *report.Report, want string) error {
	seen := 0
	for _, rc := range r.Environment.RouterCode {
		if !isLLMD(rc.Pair) {
			continue
		}
		seen++
		if rc.Implementation != want {
			return fmt.Errorf("its environment names the %s EPP as %q, want %q", rc.Pair, rc.Implementation, want)
		}
	}
	if seen == 0 {
		return fmt.Errorf("its environment names no llm-d-router pair's EPP: was it run with E2E_ROUTERS=llm-d-router?")
	}
	return nil
}

func isLLMD(pair string) bool { return strings.HasPrefix(pair, api.RouterLLMD+"+") }

func cells(r *report.Report) map[string]report.ClaimRow {
	out := map[string]report.ClaimRow{}
	for _, c := range r.Claims {
		for _, row := range c.Rows {
			out[c.Name+" / "+row.Pair] = row
		}
	}
	return out
}

func first(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// splits pairs the two rows' splits by title, then in order.
func splits(em, up []report.SplitResult) []SplitPair {
	used := make([]bool, len(up))
	var out []SplitPair
	for _, e := range em {
		i := slices.IndexFunc(up, func(u report.SplitResult) bool { return u.Title == e.Title })
		if i < 0 || used[i] {
			i = slices.Index(used, false)
		}
		p := SplitPair{Title: e.Title, Emulated: e.Counts(), Upstream: "(not measured)"}
		if i >= 0 {
			used[i], p.Upstream = true, up[i].Counts()
		}
		out = append(out, p)
	}
	return out
}
