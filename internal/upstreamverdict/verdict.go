package upstreamverdict

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Report is the part of report.json the comparison reads.
type Report struct {
	Environment struct {
		Target string `json:"target"`
	} `json:"environment"`
	Claims []Claim `json:"claims"`
	Specs  []Spec  `json:"specs"`
}

// Claim is one claim's table of report.json: a row per pair.
type Claim struct {
	Name string `json:"name"`
	Rows []struct {
		Pair   string `json:"pair"`
		Result string `json:"result"`
	} `json:"rows"`
}

// Spec is one spec of report.json.
type Spec struct {
	Name    string   `json:"name"`
	Text    string   `json:"text"`
	Claim   string   `json:"claim"`
	Pair    string   `json:"pair"`
	Result  string   `json:"result"`
	Reason  string   `json:"reason"`
	Failure string   `json:"failure"`
	Entries []string `json:"entries"`
}

// ReadReport reads a report.json.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := new(Report)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Row is one claim × pair of the comparison.
type Row struct {
	Claim, Pair        string
	Emulated, Upstream string
	// Known is the table's entry for the row, if it has one.
	Known *Difference
	// Problem says why the row fails the comparison ("" when it agrees,
	// or differs as Known says).
	Problem string
}

// Verdict is the comparison of two runs.
type Verdict struct {
	Rows []Row
	// Agree counts the rows with the same result; Known those that differ
	// as the table says.
	Agree, Known int
	// Mismatches are the rows with a problem, one line each.
	Mismatches []string
}

// OK reports whether every row agrees or differs as Known says.
func (v Verdict) OK() bool { return len(v.Mismatches) == 0 }

// Line is the verdict in one line.
func (v Verdict) Line() string {
	return fmt.Sprintf("%d rows compared (claim × pair): %d agree, %d differ as the known-differences table says, %d mismatch",
		len(v.Rows), v.Agree, v.Known, len(v.Mismatches))
}

type key struct{ claim, pair string }

func rows(r *Report) map[key]string {
	out := map[key]string{}
	for _, c := range r.Claims {
		for _, x := range c.Rows {
			out[key{c.Name, x.Pair}] = x.Result
		}
	}
	return out
}

// Compare compares the upstream run with the emulated one, row by row,
// checking each known row's evidence (the upstream specs' failures, skip
// reasons, and the router logs and exit codes in their artifacts).
func Compare(emulated, upstream *Report, known []Difference) Verdict {
	re, ru := rows(emulated), rows(upstream)
	var keys []key
	for k := range re {
		keys = append(keys, k)
	}
	for k := range ru {
		if _, ok := re[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return strings.Compare(a.claim+" "+a.pair, b.claim+" "+b.pair)
	})
	var v Verdict
	for _, k := range keys {
		row := Row{Claim: k.claim, Pair: k.pair, Emulated: orAbsent(re, k), Upstream: orAbsent(ru, k)}
		if i := slices.IndexFunc(known, func(d Difference) bool { return d.Claim == k.claim && d.Pair.String() == k.pair }); i >= 0 {
			row.Known = &known[i]
		}
		switch {
		case row.Known != nil:
			row.Problem = checkKnown(*row.Known, row, specsOf(upstream, k))
			if row.Problem == "" {
				v.Known++
			}
		case row.Emulated != row.Upstream:
			row.Problem = fmt.Sprintf("%s in the emulated run, %s upstream%s", row.Emulated, row.Upstream, reasonOf(upstream, k))
		default:
			v.Agree++
		}
		if row.Problem != "" {
			v.Mismatches = append(v.Mismatches, fmt.Sprintf("%s / %s: %s", k.claim, k.pair, row.Problem))
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

func orAbsent(m map[key]string, k key) string {
	if r, ok := m[k]; ok {
		return r
	}
	return "absent"
}

func specsOf(r *Report, k key) []Spec {
	var out []Spec
	for _, s := range r.Specs {
		if s.Claim == k.claim && s.Pair == k.pair {
			out = append(out, s)
		}
	}
	return out
}

// reasonOf is the first upstream spec reason of the row, for a mismatch.
func reasonOf(r *Report, k key) string {
	for _, s := range specsOf(r, k) {
		if s.Reason != "" && s.Result != Pass {
			return " (" + firstLine(s.Reason) + ")"
		}
	}
	return ""
}

// checkKnown is why a known row does not show what its entry says.
func checkKnown(d Difference, row Row, specs []Spec) string {
	if row.Emulated != d.Emulated || row.Upstream != d.Upstream {
		return fmt.Sprintf("%s in the emulated run, %s upstream; the known-differences table says %s and %s (%s)",
			row.Emulated, row.Upstream, d.Emulated, d.Upstream, d.Kind)
	}
	used := make([]bool, len(d.Shows))
	var problems []string
	for _, s := range specs {
		i := slices.IndexFunc(d.Shows, func(e Evidence) bool { return strings.Contains(s.Text, e.Case) })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("upstream spec %q is a case the table does not name", s.Text))
			continue
		}
		used[i] = true
		if err := d.Shows[i].check(s); err != nil {
			problems = append(problems, fmt.Sprintf("upstream spec %q: %v", s.Text, err))
		}
	}
	for i, e := range d.Shows {
		if !used[i] {
			problems = append(problems, fmt.Sprintf("no upstream spec of the case %q the table names", e.Case))
		}
	}
	return strings.Join(problems, "; ")
}

// check is why spec s does not show e.
func (e Evidence) check(s Spec) error {
	if e.Failure != "" && !regexp.MustCompile(e.Failure).MatchString(s.Failure) {
		return fmt.Errorf("failure %q does not match %q", clip(s.Failure), e.Failure)
	}
	if e.Reason != "" && !regexp.MustCompile(e.Reason).MatchString(s.Reason) {
		return fmt.Errorf("reason %q does not match %q", clip(s.Reason), e.Reason)
	}
	if e.Exit == 0 && e.Log == "" {
		return nil
	}
	dir := artifactsOf(s)
	if dir == "" {
		return fmt.Errorf("no artifacts to read the router's log and exit code from (run with collectArtifacts onFailure or always)")
	}
	if e.Exit != 0 {
		codes, err := routerExitCodes(dir)
		if err != nil {
			return err
		}
		if !slices.Contains(codes, e.Exit) {
			return fmt.Errorf("router exit codes %v in %s, want %d", codes, dir, e.Exit)
		}
	}
	if e.Log != "" {
		logs, err := routerLogs(dir)
		if err != nil {
			return err
		}
		if !regexp.MustCompile("(?m)" + e.Log).MatchString(logs) {
			return fmt.Errorf("no line of the router's logs in %s matches %q; last lines:\n%s", dir, e.Log, lastLines(logs, 3))
		}
	}
	return nil
}

// artifactsOf is the spec's artifacts directory, from its entries.
func artifactsOf(s Spec) string {
	for _, e := range s.Entries {
		if v, ok := strings.CutPrefix(e, "artifacts: "); ok {
			if p, err := strconv.Unquote(v); err == nil {
				return p
			}
			return v
		}
	}
	return ""
}

// terminated finds a container's exit codes in the sim's Pod descriptions.
var terminated = regexp.MustCompile(`(?m)^\s+(?:Last )?State:\s+Terminated\n\s+Reason:\s+\S+\n\s+Exit Code:\s+(-?\d+)$`)

// routerExitCodes are the exit codes the router Pods' descriptions show.
func routerExitCodes(dir string) ([]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "pods", "*-router-*.txt"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no router Pod description under %s/pods", dir)
	}
	var codes []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range terminated.FindAllStringSubmatch(string(b), -1) {
			n, _ := strconv.Atoi(m[1])
			codes = append(codes, n)
		}
	}
	return codes, nil
}

// routerLogs are the router containers' logs, previous and current.
func routerLogs(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "logs", "*-router-*", "router*.log"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no router container log under %s/logs", dir)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
