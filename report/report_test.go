package report

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

func entry(e Entry) types.ReportEntry {
	return types.ReportEntry{Name: e.EntryName(), Value: types.WrapEntryValue(e), Time: time.Now()}
}

// remote round-trips an entry through JSON, as entries recorded on another
// Ginkgo process reach process 1.
func remote(t *testing.T, e types.ReportEntry) types.ReportEntry {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var out types.ReportEntry
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func spec(claim string, p api.Pair, text string, state types.SpecState, entries ...types.ReportEntry) types.SpecReport {
	return types.SpecReport{
		ContainerHierarchyTexts:  []string{p.String(), claim},
		ContainerHierarchyLabels: [][]string{append(fixtures.PairLabels(p), "claim:documented"), {fixtures.FeatureLabel(claim)}},
		LeafNodeType:             types.NodeTypeIt,
		LeafNodeText:             text,
		State:                    state,
		RunTime:                  1500 * time.Millisecond,
		ParallelProcess:          1,
		ReportEntries:            entries,
	}
}

func syntheticReport(t *testing.T) types.Report {
	t.Helper()
	vrSplit := Split{Claim: "affinity", Pair: "vllm-router+vLLM", Title: "120 serial chats", Source: "vllm:request_success_total",
		Requests: 120, Replicas: []ReplicaCount{{Replica: "vr-server-a", Address: "http://127.3.0.2:8000", Count: 120}, {Replica: "vr-server-b", Address: "http://127.3.0.3:8000", Count: 0}},
		Expected: "all on one replica"}
	rrSplit := Split{Claim: "roundrobin", Pair: "sglang-gateway+SGLang", Title: "120 serial chats, --policy round_robin", Source: "sglang:num_requests_total",
		Requests: 120, Replicas: []ReplicaCount{{Replica: "sg-server-a", Count: 60}, {Replica: "sg-server-b", Count: 60}}, Expected: "60/60"}
	sixty := 60.0
	failed := spec("affinity", fixtures.SGLangGatewaySGLang, "routes every request to one replica", types.SpecStateFailed)
	failed.Failure = types.Failure{Message: "Expected split 70/50 to be all on one replica\n\nsecond line", Location: types.CodeLocation{FileName: "/w/suites/routing/affinity_test.go", LineNumber: 42}}
	skipped := spec("affinity", fixtures.LLMDRouterVLLM, "records the split", types.SpecStateSkipped)
	skipped.Failure = types.Failure{Message: "target sim does not offer llm-d-router with vLLM"}
	filtered := spec("metrics", fixtures.VLLMRouterVLLM, "names the replicas", types.SpecStateSkipped)
	escaped := spec("defaults", fixtures.SGLangGatewaySGLang, "logs <script>alert(1)</script>", types.SpecStatePassed)
	return types.Report{
		SuiteDescription: "Routing conformance",
		SuiteSucceeded:   false,
		StartTime:        time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		EndTime:          time.Date(2026, 12, 2, 10, 0, 42, 0, time.UTC),
		RunTime:          42 * time.Second,
		SuiteConfig:      types.SuiteConfig{ParallelTotal: 2, RandomSeed: 7, LabelFilter: "claim:documented && !feature:metrics"},
		SpecReports: types.SpecReports{
			{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, State: types.SpecStatePassed},
			spec("roundrobin", fixtures.SGLangGatewaySGLang, "splits 60/60", types.SpecStatePassed,
				remote(t, entry(rrSplit)),
				remote(t, entry(MetricDelta{Claim: "roundrobin", Pair: "sglang-gateway+SGLang", Metric: "smg_worker_selection_total",
					Labels: map[string]string{"policy": "round_robin"}, Before: 0, After: 120, Delta: 120})),
				remote(t, entry(Claim{Claim: "roundrobin", Pair: "sglang-gateway+SGLang", Expected: "60/60", Measured: "60/60; +120 selections"}))),
			failed,
			spec("affinity", fixtures.VLLMRouterVLLM, "routes every request to one replica", types.SpecStatePassed,
				entry(vrSplit), entry(Claim{Claim: "affinity", Pair: "vllm-router+vLLM", Expected: "all on one replica", Measured: "120/0"})),
			skipped,
			filtered,
			escaped,
			// Recorded at deletion: the cost of each deployment, two counted on
			// process 1, one reaching process 1 from process 2.
			spec("roundrobin", fixtures.VLLMRouterVLLM, "counts decisions too", types.SpecStatePassed,
				entry(DeploymentCost{Name: "a", Pair: "vllm-router+vLLM", Deleted: true, Cost: &clusters.Cost{EnginePodsStarted: 2, EnginePodsReady: 2, AcceleratorSeconds: 30}}),
				remote(t, entry(DeploymentCost{Name: "b", Pair: "sglang-gateway+SGLang", Deleted: true, Cost: &clusters.Cost{EnginePodsStarted: 3, EnginePodsReady: 2, AcceleratorSeconds: 12.5}}))),
			spec("roundrobin", fixtures.VLLMRouterVLLM, "counts decisions", types.SpecStatePassed,
				entry(MetricDelta{Claim: "roundrobin", Pair: "vllm-router+vLLM", Metric: "vllm_router_policy_decisions_total", Delta: 60, Expected: &sixty}),
				entry(Banner{Claim: "roundrobin", Pair: "vllm-router+vLLM", Expected: "policy: RoundRobin", Line: "Starting router on 0.0.0.0:8081 | policy: RoundRobin"})),
		},
	}
}

func meta(t *testing.T) Meta { return metaFor(t, config.TargetSim) }

func metaFor(t *testing.T, target string) Meta {
	t.Helper()
	c, err := config.Parse("e2e.yaml", []byte("routerImage: llm-router:v0.2.0\n"), t.TempDir(), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return Meta{Config: c, Environment: clusters.Environment{Target: target, GPUProduct: "NVIDIA H100 (simulated)",
		KubernetesVersion: "v1.35.0-sim", Notes: []string{"engines are simulated", "SGLang 0.5.18 (simulated)", "engines are simulated"}}}
}

func writeAll(t *testing.T) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "artifacts")
	files, err := Write(dir, syntheticReport(t), meta(t))
	if err != nil {
		t.Fatal(err)
	}
	return dir, files
}

func build(t *testing.T, r types.Report, m Meta) *Report {
	t.Helper()
	q, err := Build(r, m)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteProducesTheFourFilesAndTheConfigUsed(t *testing.T) {
	dir, files := writeAll(t)
	want := []string{FileJUnit, FileJSON, FileMarkdown, FileHTML, FileConfig}
	if len(files) != len(want) {
		t.Fatalf("wrote %v", files)
	}
	for _, name := range want {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestJUnitHasEverySpecAndTheFailure(t *testing.T) {
	dir, _ := writeAll(t)
	suites := parseJUnit(t, read(t, filepath.Join(dir, FileJUnit)))
	if suites.Failures != 1 {
		t.Errorf("failures = %d, want 1", suites.Failures)
	}
	var failure string
	n := 0
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			n++
			if c.Failure != nil {
				failure = c.Failure.Message
			}
		}
	}
	if n != 8 || !strings.Contains(failure, "70/50") {
		t.Errorf("cases = %d, failure = %q", n, failure)
	}
}

func TestReportJSONHasClaimsPerPairInDocumentedOrder(t *testing.T) {
	dir, _ := writeAll(t)
	r, err := Load(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	if r.SchemaVersion != SchemaVersion || r.Result != ResultFail || r.Outcome != OutcomeFailed || r.WallTime != "42s" ||
		r.Environment.Target != "sim" || r.Environment.GPU == "" || r.Environment.GinkgoNodes != 2 {
		t.Errorf("header %+v", r)
	}
	if r.Environment.RouterImage != "llm-router:v0.2.0" || len(r.Environment.Engines) != 2 || r.Environment.Engines[0].Name != "SGLang" {
		t.Errorf("environment %+v", r.Environment)
	}
	if s := r.Statistics; s.Total != 8 || s.Passed != 5 || s.Failed != 1 || s.Skipped != 2 || s.NotApplicable != 0 {
		t.Errorf("statistics %+v", s)
	}
	expect, err := fixtures.Expectations()
	if err != nil {
		t.Fatal(err)
	}
	names := expect.Names()
	if len(r.Claims) != len(names) || len(r.Pairs) != len(fixtures.DocumentedPairs) {
		t.Fatalf("claims %d, pairs %v", len(r.Claims), r.Pairs)
	}
	for i, c := range r.Claims {
		if c.Name != names[i] || len(c.Rows) != len(fixtures.DocumentedPairs) || c.Anchor != "claim-"+c.Name {
			t.Errorf("claim %d: %s with %d rows, anchor %s", i, c.Name, len(c.Rows), c.Anchor)
		}
		for _, src := range c.Sources {
			if !strings.HasPrefix(src, "docs/") || !strings.Contains(src, ".md#") {
				t.Errorf("claim %s source %q does not point at docs/<page>.md#<anchor>", c.Name, src)
			}
		}
	}
	aff := r.Claims[1]
	want := map[string]string{"vllm-router+vLLM": ResultPass, "sglang-gateway+SGLang": ResultFail, "llm-d-router+vLLM": ResultSkip, "llm-d-router+SGLang": ResultNotRun}
	for _, row := range aff.Rows {
		if row.Result != want[row.Pair] {
			t.Errorf("affinity %s = %s, want %s", row.Pair, row.Result, want[row.Pair])
		}
		if row.Expected == "" {
			t.Errorf("affinity %s has no documented outcome", row.Pair)
		}
	}
	if len(aff.Rows[0].Splits) != 1 || aff.Rows[0].Splits[0].Counts() != "120/0" || len(aff.Rows[1].Splits) != 0 || len(aff.Rows[0].Charts) != 1 {
		t.Errorf("affinity row splits %+v", aff.Rows)
	}
	if aff.Result != ResultFail || aff.Rows[0].Measured[0] != "120/0" {
		t.Errorf("affinity %+v", aff)
	}
	if r := aff.Rows[1].Reasons; len(r) != 1 || r[0] != "Expected split 70/50 to be all on one replica" {
		t.Errorf("fail reason %q, want its first line only", r)
	}
	if r := aff.Rows[2].Reasons; len(r) != 1 || r[0] != "target sim does not offer llm-d-router with vLLM" {
		t.Errorf("skip reason %q", r)
	}
	if r := r.Claims[5].Rows[0].Reasons; len(r) != 1 || !strings.Contains(r[0], "not selected") {
		t.Errorf("filtered reason %q", r)
	}
	// Left out by the label filter: not run (not "could not run"), and no
	// shortfall in the pair's verdict.
	if row := r.Claims[5].Rows[0]; row.Result != ResultNotRun {
		t.Errorf("a row the filter left out is %s", row.Result)
	}
	if v := r.Verdicts[0].Line; !strings.Contains(v, "1 not selected in this run") || strings.Contains(v, r.Claims[5].Name+",") || strings.Contains(v, r.Claims[5].Name+" did not run") {
		t.Errorf("verdict %q counts the left-out %s as a shortfall", v, r.Claims[5].Name)
	}
	if rr := r.Claims[2].Rows[1]; rr.Result != ResultPass || rr.Measured[0] != "60/60; +120 selections" {
		t.Errorf("roundrobin from a remote process %+v", rr)
	}
	// The docs say round robin does not apply to llm-d-router: N/A, not a skip.
	if rr := r.Claims[2].Rows[2]; rr.Result != ResultNotApplicable || !strings.HasPrefix(rr.Reasons[0], "not applicable: ") {
		t.Errorf("roundrobin llm-d row %+v", rr)
	}
	if got := r.Series; len(got) != 2 || got[0].Key != "smg_worker_selection_total{policy}" || got[1].Key != "vllm_router_policy_decisions_total" {
		t.Errorf("series %+v", got)
	}
}

func TestNotApplicableSpecsCountAsSkippedAndAreNamed(t *testing.T) {
	r := syntheticReport(t)
	na := spec("roundrobin", fixtures.LLMDRouterVLLM, "splits evenly", types.SpecStateSkipped)
	na.Failure = types.Failure{Message: "not applicable: llm-d-router takes no --policy"}
	r.SpecReports = append(r.SpecReports, na)
	q := build(t, r, meta(t))
	if s := q.Statistics; s.Skipped != 3 || s.NotApplicable != 1 {
		t.Errorf("statistics %+v", s)
	}
	if !strings.Contains(q.Headline, "3 skipped (1 not applicable, 1 not selected)") {
		t.Errorf("headline %q", q.Headline)
	}
}

func TestReportListsAreSorted(t *testing.T) {
	dir, _ := writeAll(t)
	r, err := Load(filepath.Join(dir, FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range r.Specs {
		order = append(order, s.Claim+"/"+s.Pair)
	}
	want := []string{"defaults/sglang-gateway+SGLang", "affinity/vllm-router+vLLM", "affinity/sglang-gateway+SGLang",
		"affinity/llm-d-router+vLLM", "roundrobin/vllm-router+vLLM", "roundrobin/vllm-router+vLLM", "roundrobin/sglang-gateway+SGLang", "metrics/vllm-router+vLLM"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("spec order %v\nwant %v", order, want)
	}
	if len(r.Splits) != 2 || r.Splits[0].Pair != "vllm-router+vLLM" || r.Splits[1].Counts() != "60/60" {
		t.Errorf("splits %+v", r.Splits)
	}
	for _, s := range r.Specs {
		for i := 1; i < len(s.Labels); i++ {
			if s.Labels[i-1] > s.Labels[i] {
				t.Errorf("labels not sorted: %v", s.Labels)
			}
		}
	}
}

func TestMarkdownHasHeadlineMatrixEnvironmentTablesAndBars(t *testing.T) {
	dir, _ := writeAll(t)
	md := read(t, filepath.Join(dir, FileMarkdown))
	for _, want := range []string{
		"# Routing conformance on the simulator: 5 passed, 1 failed, 2 skipped (1 not selected) — not a GPU qualification\n",
		"| Claim | Kind | vllm-router+vLLM | sglang-gateway+SGLang | llm-d-router+vLLM | llm-d-router+SGLang |",
		"| [Prefix affinity under the default policy](#claim-affinity) | documented | [✓ PASS](#claim-affinity--vllm-router-vllm) | [✗ FAIL](#claim-affinity--sglang-gateway-sglang) | [○ SKIP](#claim-affinity--llm-d-router-vllm) | [· NOT RUN](#claim-affinity--llm-d-router-sglang) |",
		"[– N/A](#claim-roundrobin--llm-d-router-vllm)",
		"## Failures and skips (3)",
		"| ✗ FAIL | affinity | sglang-gateway+SGLang |",
		"| Target | simulator (sim): the operator, routers and engines are emulated in-process on loopback; no GPU |",
		"| GPU | NVIDIA H100 (simulated) |",
		"| Wall time | 42s |",
		"| Engine vLLM | 0.29.0, image gpustack/runner:cuda12.9-vllm0.29.0 |",
		"| Notes | engines are simulated |",
		"### Prefix affinity under the default policy: ✗ FAIL",
		"| Pair | Operator docs say (their GPU run) | This run measured | Result | Reason |",
		"| 120/0 | ✓ PASS |",
		"| <a id=\"claim-affinity--llm-d-router-sglang\"></a>llm-d-router+SGLang | no failures; all on one replica",
		"[docs/operator.md#measured-routing-behaviour](docs/operator.md#measured-routing-behaviour)",
		"vr-server-a http://127.3.0.2:8000 " + strings.Repeat("█", 40) + " 120",
		"sg-server-a " + strings.Repeat("█", 20) + strings.Repeat(" ", 20) + " 60",
		"(suites/routing/affinity_test.go:42)",
		"| ModelDeployments created | 2 |",
		"| Engine Pods started | 5 |",
		"| Engine Pods Ready | 4 |",
		"| Accelerator-seconds | not applicable on the simulator: its engines hold no accelerator |",
		"<details><summary>vllm-router+vLLM: evidence",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("qualification.md lacks %q", want)
		}
	}
	// The notes say once what the rows do not say already.
	if strings.Count(md, "engines are simulated") != 1 || strings.Contains(md, "| Notes | SGLang 0.5.18") {
		t.Errorf("notes repeat themselves or the engine rows:\n%s", md)
	}
}

func TestHTMLIsSelfContainedWithOneChartPerSplit(t *testing.T) {
	dir, _ := writeAll(t)
	page := read(t, filepath.Join(dir, FileHTML))
	if strings.Contains(page, "<script") || regexp.MustCompile(`src=`).MatchString(page) {
		t.Error("page loads scripts or external assets")
	}
	for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "#") && !strings.HasPrefix(m[1], "docs/") {
			t.Errorf("link %q leaves the page and the repository's docs/", m[1])
		}
	}
	if !strings.Contains(page, "logs &lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("spec text is not escaped")
	}
	svgs := regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 2 {
		t.Fatalf("charts = %d, want one per split (2)", len(svgs))
	}
	for _, svg := range svgs {
		var doc struct {
			Groups []struct {
				Rects []struct {
					Width int    `xml:"width,attr"`
					Fill  string `xml:"fill,attr"`
				} `xml:"rect"`
			} `xml:"g"`
		}
		if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
			t.Fatalf("chart is not well-formed SVG: %v\n%s", err, svg)
		}
		if len(doc.Groups) != 2 || doc.Groups[0].Rects[0].Fill != BarFill {
			t.Errorf("bars %+v", doc.Groups)
		}
	}
	// 120 of 120 fills the bar width, 0 draws nothing, 60 of 120 half.
	if !strings.Contains(svgs[0], `width="440" height="16" fill="#0072b2"`) || !strings.Contains(svgs[0], `width="0" height="16"`) ||
		!strings.Contains(svgs[1], `width="220" height="16"`) {
		t.Errorf("bar widths are not proportional:\n%s\n%s", svgs[0], svgs[1])
	}
	for _, want := range []string{
		`<h1>Routing conformance on the simulator: 5 passed, 1 failed, 2 skipped (1 not selected) — not a GPU qualification</h1>`,
		`<header class="headline outcome-failed" id="headline">`,
		`<td class="cell pass" title="vllm-router&#43;vLLM: PASS"><a href="#claim-affinity--vllm-router-vllm">✓ PASS</a></td>`,
		`<td class="cell na"`, `<td class="cell skip"`, `<td class="cell fail"`,
		`<tr id="claim-affinity--vllm-router-vllm">`,
		"<th>Engine vLLM</th>", "<th>GPU</th><td class=\"lines\">NVIDIA H100 (simulated)</td>",
		"target sim does not offer llm-d-router with vLLM", `<td class="notrun">· NOT RUN</td>`,
		"<th>Operator docs say (their GPU run)</th><th>This run measured</th>",
		`<summary>vllm-router&#43;vLLM: evidence (`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("qualification.html lacks %q", want)
		}
	}
}

func TestChartsKeepFullNamesAndWrapLongTitles(t *testing.T) {
	long := "affinity-vllm-router-vllm-server-2wrwj-with-a-really-long-deployment-name"
	c := Split{Pair: "vllm-router+vLLM", Title: strings.Repeat("serial chats sharing a 500-character prefix, ", 4), Requests: 2,
		Replicas: []ReplicaCount{{Replica: long, Address: "http://127.69.0.1:8000", Count: 2}}}.Charts()[0]
	svg := c.SVG()
	if !strings.Contains(svg, ">"+long+"<") || !strings.Contains(svg, "<title>"+long+" http://127.69.0.1:8000</title>") {
		t.Errorf("the Pod name is cut:\n%s", svg)
	}
	if strings.Contains(svg, "…") || strings.Count(svg, `font-weight="bold"`) < 2 {
		t.Errorf("the title is cut rather than wrapped:\n%s", svg)
	}
	if !strings.Contains(c.Text(), long+" http://127.69.0.1:8000 ") {
		t.Errorf("text bars cut the name:\n%s", c.Text())
	}
	for _, line := range wrap(c.Title, chartWrapAt) {
		if len([]rune(line)) > chartWrapAt {
			t.Errorf("line %q is longer than %d", line, chartWrapAt)
		}
	}
}

func TestEvidenceLinesHaveNoEmptyFieldsOrEscapes(t *testing.T) {
	cases := map[string]Entry{
		`admission "--policy round_robin" refused: router "vllm-router" does not front engine "SGLang"`: Admission{Args: []string{"--policy", "round_robin"}, Refused: true,
			Message: "router \"vllm-router\" does not front engine \"SGLang\"\nmore"},
		`admission "--port 1" refused at spec.router.extraArgs[0]: owned`:     Admission{Args: []string{"--port", "1"}, Refused: true, Field: "spec.router.extraArgs[0]", Message: "owned"},
		"series smg_worker_selection_total: 1 series (no per-worker label)":   Series{Metric: "smg_worker_selection_total", Samples: 1},
		"series smg_worker_requests_active: not found in the router's scrape": Series{Metric: "smg_worker_requests_active", Label: "worker"},
		"series m{worker}: a, b (replicas: a, b)":                             Series{Metric: "m", Label: "worker", Values: []string{"a", "b"}, Replicas: []string{"a", "b"}, Samples: 2},
		"banner: Starting router | policy: RoundRobin":                        Banner{Line: "\x1b[32mStarting router\x1b[0m | policy: RoundRobin"},
	}
	for want, e := range cases {
		got := entryLine(entry(e), mustDecode(t, entry(e)), nil)
		if got != want {
			t.Errorf("%T line\n got %q\nwant %q", e, got, want)
		}
	}
	// An entry type the report does not know is shown as its JSON.
	unknown := types.ReportEntry{Name: "epp-tie-break", Value: types.WrapEntryValue(map[string]any{"seed": 42})}
	if got := entryLine(unknown, nil, nil); got != `epp-tie-break: {"seed":42}` {
		t.Errorf("unknown entry line %q", got)
	}
}

func mustDecode(t *testing.T, e types.ReportEntry) any {
	t.Helper()
	v, err := decodeKnown(e)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHeadlineNamesTheTargetAndTheCoverage(t *testing.T) {
	kube := metaFor(t, config.TargetKube)
	kube.Environment.Cluster = "gpu-prod (https://10.0.0.1:6443)"
	kube.Environment.GPUProduct = "NVIDIA-H100-80GB-HBM3"
	kube.Environment.OperatorVersion = "v0.9.0"
	r := syntheticReport(t)
	if h := build(t, r, kube).Headline; h != "Routing conformance on cluster gpu-prod (https://10.0.0.1:6443) (NVIDIA-H100-80GB-HBM3, gpustack-operator v0.9.0): "+
		"5 passed, 1 failed, 2 skipped (1 not selected) — not a GPU qualification: no spec that needs a GPU ran" {
		t.Errorf("kube headline %q", h)
	}
	r.SpecReports[1].ContainerHierarchyLabels = append(r.SpecReports[1].ContainerHierarchyLabels, []string{fixtures.LabelNeedsGPU})
	if h := build(t, r, kube).Headline; strings.Contains(h, "not a GPU qualification") {
		t.Errorf("a kube run whose GPU specs ran: %q", h)
	}
	if h := build(t, syntheticReport(t), Meta{Target: "kube"}).Headline; !strings.Contains(h, "on cluster (unnamed) (no GPU reported, operator version unknown)") {
		t.Errorf("kube headline without a description: %q", h)
	}
}

func TestSuiteLevelFailuresAreTheHeadlineInPlainText(t *testing.T) {
	r := syntheticReport(t)
	r.SuiteSucceeded = false
	var specs types.SpecReports
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType.Is(types.NodeTypeIt) {
			sr.State, sr.Failure, sr.ReportEntries = types.SpecStateSkipped, types.Failure{}, nil
		}
		specs = append(specs, sr)
	}
	// Process 2 first: it only knows that process 1 failed.
	specs = append(specs,
		types.SpecReport{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, State: types.SpecStateFailed, ParallelProcess: 2,
			Failure: types.Failure{Message: "\x1b[1mSynchronizedBeforeSuite failed on Ginkgo parallel process #1\x1b[0m\nThe first ..."}},
		types.SpecReport{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, State: types.SpecStateFailed, ParallelProcess: 1,
			Failure: types.Failure{Message: "\x1b[38;5;9mthe suite config is invalid: e2e.yaml: target \"gke\" is not one of sim, kube, kind\x1b[0m"}})
	r.SpecReports = specs
	q := build(t, r, Meta{Target: "gke"})
	want := `Routing conformance on target gke did not run: suite setup failed: the suite config is invalid: e2e.yaml: target "gke" is not one of sim, kube, kind`
	if q.Outcome != OutcomeDidNotRun || q.Headline != want {
		t.Errorf("outcome %s, headline\n %q\nwant %q", q.Outcome, q.Headline, want)
	}
	if len(q.SuiteFailures) != 1 || strings.Contains(q.SuiteFailures[0], "\x1b") {
		t.Errorf("suite failures %q", q.SuiteFailures)
	}
	for _, s := range q.Specs {
		want := "not run: the suite setup failed (see the headline)"
		if s.Claim == "metrics" { // the label filter leaves it out
			want = NotSelected
		}
		if s.Result != ResultSkip || s.Reason != want {
			t.Errorf("spec %s: %s %q", s.Name, s.Result, s.Reason)
		}
	}
	// No config at all: the Target row says so rather than being empty.
	q = build(t, r, Meta{})
	if q.Environment.Block[0] != (EnvRow{Name: "Target", Value: "not known: the suite stopped before it read its config"}) {
		t.Errorf("target row %+v", q.Environment.Block[0])
	}
	page, err := HTML(q)
	if err != nil || !strings.Contains(page, `<header class="headline outcome-did-not-run"`) || !strings.Contains(page, "Suite-level failures") {
		t.Errorf("did-not-run page: %v", err)
	}
}

func TestInterruptedRunIsAPartialReport(t *testing.T) {
	r := syntheticReport(t)
	r.SpecialSuiteFailureReasons = []string{"Interrupted by User"}
	r.SpecReports[1].State = types.SpecStateInterrupted
	r.SpecReports[1].Failure = types.Failure{Message: "Interrupted by User"}
	unrun := spec("admission", fixtures.SGLangGatewaySGLang, "refuses owned flags", types.SpecStateSkipped)
	r.SpecReports = append(r.SpecReports, unrun)
	q := build(t, r, meta(t))
	if !q.Interrupted || q.Outcome != OutcomeInterrupted {
		t.Fatalf("interrupted %v, outcome %s", q.Interrupted, q.Outcome)
	}
	if !strings.HasPrefix(q.Headline, "Routing conformance on the simulator: interrupted after 6 of 8 selected specs: 4 passed, 2 failed, 3 skipped (1 not selected) — partial report — not a GPU qualification") {
		t.Errorf("headline %q", q.Headline)
	}
	if q.SuiteFailures[0] != "interrupted by the user (Ctrl-C): the report is partial" {
		t.Errorf("suite failures %q", q.SuiteFailures)
	}
	for _, s := range q.Specs {
		if s.Claim == "admission" && s.Pair == "sglang-gateway+SGLang" && s.Reason != "not run: the run was interrupted before this spec" {
			t.Errorf("unrun spec reason %q", s.Reason)
		}
		if s.State == "interrupted" && !strings.HasPrefix(s.Reason, "interrupted while running") {
			t.Errorf("interrupted spec reason %q", s.Reason)
		}
	}
}

func TestUnreadableEntryIsListedNotFatal(t *testing.T) {
	r := syntheticReport(t)
	r.SpecReports[1].ReportEntries = append(r.SpecReports[1].ReportEntries, types.ReportEntry{Name: EntrySplit, Value: types.ReportEntryValue{AsJSON: `"not a split"`}})
	q := build(t, r, meta(t))
	found := false
	for _, s := range q.Specs {
		for _, e := range s.Entries {
			found = found || strings.Contains(e, "unreadable split entry")
		}
	}
	if !found {
		t.Error("the unreadable entry is not listed")
	}
}

func TestCostIsSummedOnlyWhenEveryDeploymentWasCounted(t *testing.T) {
	r := syntheticReport(t)
	q := build(t, r, metaFor(t, config.TargetKube))
	c := q.Environment.Cost
	if c.ModelDeployments != 2 || c.Counted != 2 || c.EnginePodsStarted == nil || *c.EnginePodsStarted != 5 || *c.EnginePodsReady != 4 || *c.AcceleratorSeconds != 42.5 {
		t.Errorf("cost %+v", c)
	}
	if md := Markdown(q); !strings.Contains(md, "| Accelerator-seconds | 42.50 (engine Pods, Ready to deleted, times accelerators) |") {
		t.Errorf("markdown cost rows:\n%s", md)
	}
	// The simulator holds no accelerator: not applicable, never a measured 0.
	sim := build(t, r, meta(t)).Environment.Cost
	if sim.AcceleratorSeconds != nil || !strings.Contains(sim.AcceleratorSecondsNotApplicable, "not applicable on the simulator") {
		t.Errorf("sim cost %+v", sim)
	}
	r.SpecReports[1].ReportEntries = append(r.SpecReports[1].ReportEntries,
		remote(t, entry(DeploymentCost{Name: "c", Pair: "vllm-router+vLLM", Error: "kube: engine Pods are not counted yet"})))
	q = build(t, r, metaFor(t, config.TargetKube))
	c = q.Environment.Cost
	if c.ModelDeployments != 3 || c.Counted != 2 || c.EnginePodsStarted != nil || c.AcceleratorSeconds != nil ||
		len(c.NotCounted) != 1 || c.NotCounted[0] != "kube: engine Pods are not counted yet" {
		t.Errorf("a deployment without a cost must leave the figures out, not add zeros: %+v", c)
	}
	md := Markdown(q)
	if !strings.Contains(md, "| Engine Pods, accelerator-seconds | not counted: the target counted 2 of 3 deployments (kube: engine Pods are not counted yet) |") {
		t.Errorf("markdown cost rows:\n%s", md)
	}
	b, _ := json.Marshal(q.Environment.Cost)
	if !strings.Contains(string(b), `"modelDeploymentsCreated":3`) || strings.Contains(string(b), "enginePodsStarted") {
		t.Errorf("report.json cost %s", b)
	}
}

func TestEntryNamesMatchTheirTypes(t *testing.T) {
	for name, fresh := range entryTypes {
		e, ok := fresh().(Entry)
		if !ok || e.EntryName() != name {
			t.Errorf("entryTypes[%s] makes %T", name, fresh())
		}
		if _, ok := fresh().(Describer); !ok {
			t.Errorf("%T does not describe itself in a line", fresh())
		}
	}
}

func TestParseRefusesAnotherSchemaVersion(t *testing.T) {
	for _, doc := range []string{`{"result":"PASS","specs":[]}`, `{"schemaVersion":99}`} {
		_, err := Parse("old/report.json", []byte(doc))
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "old/report.json") || !strings.Contains(err.Error(), "reads schemaVersion 2 only") {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// Ginkgo's log shows a report entry through its String method, else as
// %+v: every kind of evidence must read as its figures there, never as a
// pointer (a DeploymentCost showed "Cost:0x...").
func TestEveryEntryReadsAsItsFiguresInGinkgosLog(t *testing.T) {
	exit := int32(2)
	samples := map[string]any{
		EntryDeploymentCost: DeploymentCost{Name: "md-1", Pair: "vllm-router+vLLM", Cost: &clusters.Cost{EnginePodsStarted: 2, EnginePodsReady: 2, AcceleratorSeconds: 12.5}},
		EntryRouterExit:     RouterExit{Value: "roundrobin", ExitCode: &exit},
	}
	for name, fresh := range entryTypes {
		v, ok := samples[name]
		if !ok {
			v = reflect.ValueOf(fresh()).Elem().Interface()
		}
		if _, ok := v.(fmt.Stringer); !ok {
			t.Errorf("entry %s (%T) has no String method: Ginkgo prints it with %%+v", name, v)
			continue
		}
		if got := types.WrapEntryValue(v).String(); strings.Contains(got, "0x") {
			t.Errorf("entry %s reads %q in Ginkgo's log", name, got)
		}
	}
	got := types.WrapEntryValue(samples[EntryDeploymentCost]).String()
	if got != "deployment md-1: 2 engine Pods started, 2 Ready, 12.50 accelerator-seconds" {
		t.Errorf("deployment-cost reads %q", got)
	}
	if got := types.WrapEntryValue(samples[EntryRouterExit]).String(); !strings.Contains(got, "exit 2") {
		t.Errorf("router-exit reads %q", got)
	}
}
