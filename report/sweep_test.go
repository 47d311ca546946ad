package report

import (
	"encoding/xml"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/fixtures"
)

func sweepReport(t *testing.T) *Report {
	t.Helper()
	level := func(c int, a, b float64) SweepLevel {
		return SweepLevel{Concurrency: c, Requests: 121, Replicas: []ReplicaCount{{Replica: "vr-server-a", Count: a}, {Replica: "vr-server-b", Count: b}},
			Latency: Millis(20*time.Millisecond, 31500*time.Microsecond, 40*time.Millisecond), TTFT: Millis(2*time.Millisecond, 3*time.Millisecond, 4*time.Millisecond)}
	}
	sw := Sweep{Claim: "concurrency", Pair: "vllm-router+vLLM", Title: "120 chats per level", Source: "vllm:request_success_total",
		Expected: "every replica used", Levels: []SweepLevel{level(2, 61, 60), level(16, 121, 0)}}
	r := types.Report{SuiteDescription: "Routing conformance", SuiteSucceeded: true, RunTime: time.Second,
		SpecReports: types.SpecReports{spec("concurrency", fixtures.VLLMRouterVLLM, "spreads", types.SpecStatePassed, remote(t, entry(sw)))}}
	out, err := Build(r, meta(t))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSweepEntryReachesTheReportFromAnyProcess(t *testing.T) {
	if (Sweep{}).EntryName() != EntrySweep {
		t.Fatal("Sweep.EntryName")
	}
	r := sweepReport(t)
	if len(r.Sweeps) != 1 || r.Sweeps[0].Result != ResultPass || len(r.Sweeps[0].Levels) != 2 || r.Sweeps[0].Levels[0].Counts() != "61/60" {
		t.Fatalf("sweeps %+v", r.Sweeps)
	}
	if got := r.Specs[0].Entries[0]; !strings.Contains(got, "sweep vllm-router+vLLM 120 chats per level: c=2 61/60 (0 failed), c=16 121/0") {
		t.Errorf("entry line %q", got)
	}
}

func TestSweepRendersATableAndAStackedBarPerLevel(t *testing.T) {
	r := sweepReport(t)
	md := Markdown(r)
	for _, want := range []string{"## Concurrency sweeps", "| 2 | 61/60 | 0 of 121 | 20.0 / 31.5 / 40.0 | 2.0 / 3.0 / 4.0 |", "c=16\n```"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	page, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	svgs := regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 1 {
		t.Fatalf("charts = %d, want the sweep's one", len(svgs))
	}
	var doc struct {
		Rects []struct {
			Width string `xml:"width,attr"`
			Fill  string `xml:"fill,attr"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal([]byte(svgs[0]), &doc); err != nil {
		t.Fatalf("chart is not well-formed SVG: %v", err)
	}
	// Two segments per level, then one legend swatch per replica; 121/0
	// fills the 360-wide bar with the first replica's colour.
	if len(doc.Rects) != 6 || doc.Rects[0].Fill != BarFill || doc.Rects[1].Fill == BarFill || doc.Rects[2].Width != "360.0" || doc.Rects[3].Width != "0.0" {
		t.Errorf("rects %+v", doc.Rects)
	}
	if !strings.Contains(page, "<td>61/60</td><td>0 of 121</td>") {
		t.Error("html lacks the level table")
	}
}

func TestExtendedClaimTablesSayTheirOutcomeIsDerived(t *testing.T) {
	r := sweepReport(t)
	var kinds []string
	for _, c := range r.Claims {
		if c.Name == "concurrency" || c.Name == "affinity" {
			kinds = append(kinds, c.Name+"="+c.Kind)
		}
	}
	if strings.Join(kinds, ",") != "affinity=documented,concurrency=extended" {
		t.Errorf("kinds %v", kinds)
	}
	if md := Markdown(r); !strings.Contains(md, "### Concurrent spread of prefix-sharing chats (extended: expected outcome derived from the routers' algorithms): ✓ PASS") {
		t.Errorf("markdown does not mark the extended claim:\n%s", md)
	}
}

// Every kind of claim in expect.yaml heads its expected column with what
// that column rests on, in the Markdown and the HTML: the docs' own GPU run,
// a derivation, or derived bounds, never one worded as the other.
func TestEachClaimKindHeadsItsExpectedColumn(t *testing.T) {
	r := build(t, syntheticReport(t), meta(t))
	page, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	md := Markdown(r)
	want := map[string]string{fixtures.KindDocumented: colDocs, fixtures.KindExtended: colDerived, fixtures.KindResilience: colBound}
	seen := map[string]bool{}
	for _, c := range r.Claims {
		col, ok := want[c.Kind]
		if !ok {
			t.Errorf("claim %s has kind %q, which the report has no heading for", c.Name, c.Kind)
			continue
		}
		seen[c.Kind] = true
		section := md[strings.Index(md, `<a id="`+c.Anchor+`"></a>`):]
		if !strings.Contains(firstLines(section, 6), "| Pair | "+col+" | "+colMeasured+" |") {
			t.Errorf("claim %s (%s): markdown table not headed %q:\n%s", c.Name, c.Kind, col, firstLines(section, 6))
		}
		hsec := page[strings.Index(page, `<h3 id="`+c.Anchor+`"`):]
		if !strings.Contains(hsec[:min(len(hsec), 2000)], "<th>"+col+"</th>") {
			t.Errorf("claim %s (%s): HTML table not headed %q", c.Name, c.Kind, col)
		}
	}
	for kind := range want {
		if !seen[kind] {
			t.Errorf("expect.yaml has no %s claim: this test checks nothing for it", kind)
		}
	}
}
