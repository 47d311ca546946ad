package report

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/onsi/ginkgo/v2/reporters"
)

// JUnit renders junit.xml from r alone, so a CI system's test view shows
// the facts the Markdown and the JSON show: a test case per spec (its
// result and one-line reason, the whole failure and the evidence), a failed
// case per suite-level failure, and the headline, the environment block
// and every matrix cell as properties.
func JUnit(r *Report) ([]byte, error) {
	suite := reporters.JUnitTestSuite{
		Name:      r.Suite,
		Package:   "suites/routing",
		Timestamp: r.StartTime.Format("2006-01-02T15:04:05"),
		Time:      r.WallSeconds,
	}
	prop := func(name, value string) {
		suite.Properties.Properties = append(suite.Properties.Properties, reporters.JUnitProperty{Name: name, Value: value})
	}
	prop("SchemaVersion", fmt.Sprint(r.SchemaVersion))
	prop("Headline", r.Headline)
	prop("Outcome", r.Outcome)
	prop("Result", r.Result)
	for _, e := range r.Environment.Block {
		prop("Environment "+e.Name, e.Value)
	}
	for _, c := range r.Claims {
		prop(kindProperty(c.Name), c.Kind)
		for _, row := range c.Rows {
			prop(matrixProperty(c.Name, row.Pair), row.Result)
		}
	}
	for _, v := range r.Verdicts {
		prop("Verdict "+v.Pair, v.Line)
	}
	for _, f := range r.SuiteFailures {
		suite.TestCases = append(suite.TestCases, reporters.JUnitTestCase{
			Name: "[suite] " + firstLines(f, 1), Classname: r.Suite, Status: "failed",
			Failure: &reporters.JUnitFailure{Message: firstLines(f, 1), Type: "suite", Description: f},
		})
		suite.Failures++
	}
	for _, s := range r.Specs {
		tc := reporters.JUnitTestCase{Name: s.Name, Classname: junitClass(s), Time: s.RunTimeSeconds}
		out := strings.Join(s.Entries, "\n")
		switch s.Result {
		case ResultPass:
			tc.Status = "passed"
		case ResultFail:
			tc.Status = "failed"
			desc := s.Failure
			if s.Location != "" {
				desc += "\n" + s.Location
			}
			tc.Failure = &reporters.JUnitFailure{Message: s.Reason, Type: "failed", Description: desc}
			suite.Failures++
		default:
			tc.Status = "skipped"
			tc.Skipped = &reporters.JUnitSkipped{Message: s.Result + ": " + s.Reason}
			suite.Skipped++
		}
		tc.SystemOut = out
		suite.TestCases = append(suite.TestCases, tc)
	}
	suite.Tests = len(suite.TestCases)
	all := reporters.JUnitTestSuites{Tests: suite.Tests, Failures: suite.Failures, Time: suite.Time, TestSuites: []reporters.JUnitTestSuite{suite}}
	b, err := xml.MarshalIndent(all, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

// matrixProperty names a matrix cell's JUnit property.
func matrixProperty(claim, pair string) string { return "Matrix " + claim + " " + pair }

// kindProperty names a claim's kind property (documented, extended, ...).
func kindProperty(claim string) string { return "Claim kind " + claim }

func junitClass(s SpecResult) string {
	switch {
	case s.Claim != "" && s.Pair != "":
		return s.Claim + "." + s.Pair
	case s.Claim != "":
		return s.Claim
	}
	return "routing"
}
