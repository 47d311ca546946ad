package suiterun

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/report"
)

// maxSkipReasons is how many distinct skip reasons the summary lists.
const maxSkipReasons = 5

// Summarize prints the end of a run in one screen: the headline, every
// failed claim and suite-level failure with its one-line cause, the skip
// reasons counted, and where the report is. Without a report it says so,
// rather than pointing at a file that was never written.
func Summarize(w io.Writer, res Result) {
	fmt.Fprintln(w, strings.Repeat("─", 72))
	if res.Report == "" {
		fmt.Fprintln(w, "e2e: no report was written: the suite stopped before its report (see the output above)")
		return
	}
	r, err := report.Load(res.Report)
	if err != nil {
		fmt.Fprintf(w, "e2e: the report %s cannot be read: %v\n", res.Report, err)
		return
	}
	fmt.Fprintln(w, r.Headline)
	if g := r.Environment.Edits.Fallback; g != "" {
		fmt.Fprintln(w, "  ! "+g)
	}
	for _, f := range r.SuiteFailures {
		// The cause of a run that did not start is the headline already.
		if !strings.Contains(r.Headline, firstLine(f)) {
			fmt.Fprintf(w, "  ! %s\n", firstLine(f))
		}
	}
	var failed []string
	for _, c := range r.Claims {
		for _, row := range c.Rows {
			if row.Result == report.ResultFail {
				failed = append(failed, fmt.Sprintf("  ✗ %s / %s: %s", c.Name, row.Pair, firstLine(strings.Join(row.Reasons, "; "))))
			}
		}
	}
	for _, s := range r.Specs {
		if s.Result == report.ResultFail && s.Claim == "" {
			failed = append(failed, fmt.Sprintf("  ✗ %s: %s", s.Name, s.Reason))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "Failed (%d):\n%s\n", len(failed), strings.Join(failed, "\n"))
	}
	if skips := skipReasons(r); len(skips) > 0 {
		fmt.Fprintf(w, "Skipped (%d):\n", r.Statistics.Skipped)
		for _, s := range skips {
			fmt.Fprintf(w, "  ○ %s\n", s)
		}
	}
	dir := filepath.Dir(res.Report)
	fmt.Fprintf(w, "report: %s (also %s, %s, %s)\n", filepath.Join(dir, report.FileHTML), report.FileMarkdown, report.FileJSON, report.FileJUnit)
}

// skipReasons are the distinct reasons of skipped specs, most frequent
// first, counted.
func skipReasons(r *report.Report) []string {
	count := map[string]int{}
	for _, s := range r.Specs {
		if s.Result != report.ResultPass && s.Result != report.ResultFail {
			count[firstLine(s.Reason)]++
		}
	}
	reasons := make([]string, 0, len(count))
	for k := range count {
		reasons = append(reasons, k)
	}
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(cmp.Compare(count[b], count[a]), strings.Compare(a, b)) })
	var out []string
	for i, k := range reasons {
		if i == maxSkipReasons {
			out = append(out, fmt.Sprintf("… and %d more reasons (see the report)", len(reasons)-i))
			break
		}
		out = append(out, fmt.Sprintf("%d × %s", count[k], k))
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
