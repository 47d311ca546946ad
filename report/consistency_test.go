package report

import (
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

type junitDoc struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Suites   []struct {
		Skipped    int `xml:"skipped,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name    string `xml:"name,attr"`
			Status  string `xml:"status,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func parseJUnit(t *testing.T, doc string) junitDoc {
	t.Helper()
	var j junitDoc
	if err := xml.Unmarshal([]byte(doc), &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Suites) != 1 {
		t.Fatalf("junit has %d test suites, want 1", len(j.Suites))
	}
	return j
}

// TestMarkdownJSONAndJUnitCarryTheSameFacts writes each kind of run and
// reads the facts back from each file: the headline, the environment block,
// every matrix cell, every spec's result and reason, the suite failures.
func TestMarkdownJSONAndJUnitCarryTheSameFacts(t *testing.T) {
	setupFailed := syntheticReport(t)
	setupFailed.SpecReports = append(setupFailed.SpecReports, types.SpecReport{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite,
		State: types.SpecStateFailed, Failure: types.Failure{Message: "cannot reach the kube target: dial tcp 10.0.0.1:6443: connect: connection refused"}})
	interrupted := syntheticReport(t)
	interrupted.SpecialSuiteFailureReasons = []string{"Interrupted by User"}
	runs := map[string]types.Report{"failed": syntheticReport(t), "did-not-run": setupFailed, "interrupted": interrupted}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Write(dir, run, meta(t)); err != nil {
				t.Fatal(err)
			}
			r, err := Load(filepath.Join(dir, FileJSON))
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != name {
				t.Fatalf("outcome %s, want %s", r.Outcome, name)
			}
			md := read(t, filepath.Join(dir, FileMarkdown))
			j := parseJUnit(t, read(t, filepath.Join(dir, FileJUnit)))
			props := map[string]string{}
			for _, p := range j.Suites[0].Properties {
				props[p.Name] = p.Value
			}

			// The headline.
			if !strings.HasPrefix(md, "# "+r.Headline+"\n") || props["Headline"] != r.Headline {
				t.Errorf("headline differs: json %q, junit %q, markdown starts %q", r.Headline, props["Headline"], firstLines(md, 1))
			}
			// The environment block.
			for _, e := range r.Environment.Block {
				if !strings.Contains(md, fmt.Sprintf("| %s | %s |", e.Name, mdCell(e.Value))) || props["Environment "+e.Name] != e.Value {
					t.Errorf("environment row %s = %q differs (junit %q)", e.Name, e.Value, props["Environment "+e.Name])
				}
			}
			// Every matrix cell.
			for _, c := range r.Claims {
				if c.Kind == "" || !strings.Contains(md, fmt.Sprintf("| [%s](#%s) | %s |", mdCell(c.Title), c.Anchor, c.Kind)) || props[kindProperty(c.Name)] != c.Kind {
					t.Errorf("claim %s: kind %q differs (junit %q)", c.Name, c.Kind, props[kindProperty(c.Name)])
				}
				for _, row := range c.Rows {
					if !strings.Contains(md, fmt.Sprintf("[%s](#%s)", marked(row.Result), row.Anchor)) || props[matrixProperty(c.Name, row.Pair)] != row.Result {
						t.Errorf("matrix %s/%s = %s differs (junit %q)", c.Name, row.Pair, row.Result, props[matrixProperty(c.Name, row.Pair)])
					}
				}
			}
			// Every pair's verdict.
			if len(r.Verdicts) != len(r.Pairs) {
				t.Errorf("%d verdicts for %d pairs", len(r.Verdicts), len(r.Pairs))
			}
			for _, v := range r.Verdicts {
				if !strings.Contains(md, "- "+mdCell(v.Line)+"\n") || props["Verdict "+v.Pair] != v.Line {
					t.Errorf("verdict %q differs (junit %q)", v.Line, props["Verdict "+v.Pair])
				}
			}
			// Every spec, and every suite failure, as a test case.
			cases := map[string]int{}
			for i, c := range j.Suites[0].Cases {
				cases[c.Name] = i
			}
			failed, skipped := 0, 0
			for _, s := range r.Specs {
				i, ok := cases[s.Name]
				if !ok {
					t.Errorf("junit lacks spec %q", s.Name)
					continue
				}
				c := j.Suites[0].Cases[i]
				switch s.Result {
				case ResultPass:
					ok = c.Status == "passed"
				case ResultFail:
					failed++
					ok = c.Status == "failed" && c.Failure != nil && c.Failure.Message == s.Reason
				default:
					skipped++
					ok = c.Status == "skipped" && c.Skipped != nil && c.Skipped.Message == s.Result+": "+s.Reason
				}
				if !ok {
					t.Errorf("spec %q: json %s %q, junit %+v", s.Name, s.Result, s.Reason, c)
				}
				reason := s.Reason
				if s.Location != "" {
					reason += " (" + s.Location + ")"
				}
				if !strings.Contains(md, fmt.Sprintf("| %s | %s | %.2fs | %s |", mdCell(s.Name), marked(s.Result), s.RunTimeSeconds, mdCell(reason))) {
					t.Errorf("markdown lacks spec row %q %s %q", s.Name, s.Result, reason)
				}
			}
			for _, f := range r.SuiteFailures {
				if _, ok := cases["[suite] "+firstLines(f, 1)]; !ok || !strings.Contains(md, "- "+mdCell(f)) {
					t.Errorf("suite failure %q missing from junit or markdown", f)
				}
			}
			if j.Failures != failed+len(r.SuiteFailures) || j.Suites[0].Skipped != skipped || failed != r.Statistics.Failed || skipped != r.Statistics.Skipped {
				t.Errorf("counts: junit %d failures %d skipped; json %+v with %d suite failures", j.Failures, j.Suites[0].Skipped, r.Statistics, len(r.SuiteFailures))
			}
		})
	}
}
