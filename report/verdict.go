package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/config"
)

// verdicts reads each pair's column of the matrix: FAIL if a claim failed;
// NOT QUALIFIED if none passed; INCOMPLETE if some did not run; else PASS.
// On the simulator every line says it is not a GPU qualification.
func verdicts(r *Report) []Verdict {
	var out []Verdict
	for i, pair := range r.Pairs {
		var passed, failed, skipped, na, notSelected []string
		var firstSkip string
		for _, c := range r.Claims {
			if i >= len(c.Rows) {
				continue
			}
			row := c.Rows[i]
			switch row.Result {
			case ResultPass:
				passed = append(passed, c.Name)
			case ResultFail:
				failed = append(failed, c.Name)
			case ResultNotApplicable:
				na = append(na, c.Name)
			case ResultNotRun:
				if slices.Equal(row.Reasons, []string{NotSelected}) {
					// The run chose not to cover it: not a shortfall.
					notSelected = append(notSelected, c.Name)
					continue
				}
				fallthrough
			default:
				skipped = append(skipped, c.Name)
				if firstSkip == "" && len(row.Reasons) > 0 {
					firstSkip = firstLines(row.Reasons[0], 1)
				}
			}
		}
		applicable := len(passed) + len(failed) + len(skipped)
		v := Verdict{Pair: pair}
		var why string
		switch {
		case len(failed) > 0:
			v.Result = ResultFail
			why = fmt.Sprintf("%d of %d applicable claims failed (%s)", len(failed), applicable, strings.Join(failed, ", "))
		case len(passed) == 0:
			v.Result = VerdictNotQualified
			why = "no claim passed"
			if firstSkip != "" {
				why += ": " + firstSkip
			}
		case len(skipped) > 0:
			v.Result = VerdictIncomplete
			why = fmt.Sprintf("%d of %d applicable claims passed; %s did not run", len(passed), applicable, strings.Join(skipped, ", "))
			if firstSkip != "" {
				why += " (" + firstSkip + ")"
			}
		default:
			v.Result = ResultPass
			why = fmt.Sprintf("all %d applicable claims passed", len(passed))
		}
		if len(na) > 0 {
			why += fmt.Sprintf("; %d not applicable", len(na))
		}
		if len(notSelected) > 0 {
			why += fmt.Sprintf("; %d not selected in this run", len(notSelected))
		}
		if r.Environment.Target == config.TargetSim {
			why += " — on the simulator, not a GPU qualification"
		}
		v.Line = fmt.Sprintf("%s: %s: %s", pair, v.Result, why)
		out = append(out, v)
	}
	return out
}
