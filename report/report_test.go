package report

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
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
		SuiteConfig:      types.SuiteConfig{ParallelTotal: 2, RandomSeed: 7, LabelFilter: "claim:documented"},
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

func meta(t *testing.T) Meta {
	t.Helper()
	c, err := config.Parse("e2e.yaml", []byte("routerImage: llm-router:v0.2.0\n"), t.TempDir(), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return Meta{Config: c, Environment: clusters.Environment{Target: "sim", GPUProduct: "NVIDIA H100 (simulated)",
		KubernetesVersion: "v1.35.0-sim", Notes: []string{"engines are simulated"}}}
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

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteProducesTheFourFiles(t *testing.T) {
	dir, files := writeAll(t)
	want := []string{FileJUnit, FileJSON, FileMarkdown, FileHTML}
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
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(read(t, filepath.Join(dir, FileJUnit))), &suites); err != nil {
		t.Fatal(err)
	}
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
	if n < 7 || !strings.Contains(failure, "70/50") {
		t.Errorf("cases = %d, failure = %q", n, failure)
	}
}

func TestReportJSONHasClaimsPerPairInDocumentedOrder(t *testing.T) {
	dir, _ := writeAll(t)
	var r Report
	if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, FileJSON))), &r); err != nil {
		t.Fatal(err)
	}
	if r.Result != ResultFail || r.WallTime != "42s" || r.Environment.Target != "sim" || r.Environment.GPU == "" || r.Environment.GinkgoNodes != 2 {
		t.Errorf("header %+v", r)
	}
	if r.Environment.RouterImage != "llm-router:v0.2.0" || len(r.Environment.Engines) != 2 || r.Environment.Engines[0].Name != "SGLang" {
		t.Errorf("environment %+v", r.Environment)
	}
	if s := r.Statistics; s.Total != 8 || s.Passed != 5 || s.Failed != 1 || s.Skipped != 2 {
		t.Errorf("statistics %+v", s)
	}
	names := fixtures.ClaimNames()
	if len(r.Claims) != len(names) {
		t.Fatalf("claims %d", len(r.Claims))
	}
	for i, c := range r.Claims {
		if c.Name != names[i] || len(c.Rows) != len(fixtures.DocumentedPairs) {
			t.Errorf("claim %d: %s with %d rows", i, c.Name, len(c.Rows))
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
	if len(aff.Rows[0].Splits) != 1 || aff.Rows[0].Splits[0].Counts() != "120/0" || len(aff.Rows[1].Splits) != 0 {
		t.Errorf("affinity row splits %+v", aff.Rows)
	}
	if aff.Result != ResultFail || aff.Rows[0].Measured[0] != "120/0" {
		t.Errorf("affinity %+v", aff)
	}
	if r := aff.Rows[1].Reasons; len(r) != 1 || !strings.HasPrefix(r[0], "Expected split 70/50") {
		t.Errorf("fail reason %q", r)
	}
	if r := aff.Rows[2].Reasons; len(r) != 1 || r[0] != "target sim does not offer llm-d-router with vLLM" {
		t.Errorf("skip reason %q", r)
	}
	if r := r.Claims[5].Rows[0].Reasons; len(r) != 1 || !strings.Contains(r[0], "not selected") {
		t.Errorf("filtered reason %q", r)
	}
	if rr := r.Claims[2].Rows[1]; rr.Result != ResultPass || rr.Measured[0] != "60/60; +120 selections" {
		t.Errorf("roundrobin from a remote process %+v", rr)
	}
}

func TestReportListsAreSorted(t *testing.T) {
	dir, _ := writeAll(t)
	var r Report
	if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, FileJSON))), &r); err != nil {
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

func TestMarkdownHasEnvironmentTablesAndBars(t *testing.T) {
	dir, _ := writeAll(t)
	md := read(t, filepath.Join(dir, FileMarkdown))
	for _, want := range []string{
		"# Routing qualification: FAIL",
		"| Target | sim |",
		"| GPU | NVIDIA H100 (simulated) |",
		"| Wall time | 42s |",
		"| Engine vLLM | 0.29.0 (gpustack/runner:cuda12.9-vllm0.29.0) |",
		"### Prefix affinity under the default policy: FAIL",
		"| vllm-router+vLLM | no failures; all on one replica (measured 354/0;",
		"| 120/0 | PASS |",
		"| llm-d-router+vLLM | no failures; split recorded, not asserted (the docs measured 187/170 on two GPUs) |  | SKIP | target sim does not offer llm-d-router with vLLM |",
		"| llm-d-router+SGLang | no failures; all on one replica (measured 375/0) |  | NOT RUN |",
		strings.Repeat("█", 40) + " 120",
		strings.Repeat("█", 20) + strings.Repeat(" ", 20) + " 60",
		"(suites/routing/affinity_test.go:42)",
		"| ModelDeployments created | 2 |",
		"| Engine Pods started | 5 |",
		"| Engine Pods Ready | 4 |",
		"| Accelerator-seconds | 42.50 (engine Pods, Ready to deleted, times accelerators) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("qualification.md lacks %q", want)
		}
	}
}

func TestHTMLIsSelfContainedWithOneChartPerSplit(t *testing.T) {
	dir, _ := writeAll(t)
	page := read(t, filepath.Join(dir, FileHTML))
	if strings.Contains(page, "<script") || regexp.MustCompile(`(src|href)=`).MatchString(page) {
		t.Error("page loads scripts or external assets")
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
			Rects []struct {
				Width int    `xml:"width,attr"`
				Fill  string `xml:"fill,attr"`
			} `xml:"rect"`
		}
		if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
			t.Fatalf("chart is not well-formed SVG: %v\n%s", err, svg)
		}
		if len(doc.Rects) != 2 || doc.Rects[0].Fill != BarFill {
			t.Errorf("bars %+v", doc.Rects)
		}
	}
	// 120 of 120 fills the bar width, 0 draws nothing, 60 of 120 half.
	if !strings.Contains(svgs[0], `width="240" height="18" fill="#1f77b4"`) || !strings.Contains(svgs[0], `width="0" height="18"`) ||
		!strings.Contains(svgs[1], `width="120" height="18"`) {
		t.Errorf("bar widths are not proportional:\n%s\n%s", svgs[0], svgs[1])
	}
	for _, want := range []string{"Routing qualification: <span class=\"fail\">FAIL</span>", "<th>Engine vLLM</th>", "<th>GPU</th><td>NVIDIA H100 (simulated)</td>",
		"target sim does not offer llm-d-router with vLLM", `<td class="notrun">NOT RUN</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("qualification.html lacks %q", want)
		}
	}
}

func TestSuiteLevelFailuresAreReported(t *testing.T) {
	r := syntheticReport(t)
	r.SpecialSuiteFailureReasons = []string{"Interrupted by User"}
	for range 2 { // one per process
		r.SpecReports = append(r.SpecReports, types.SpecReport{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, State: types.SpecStateFailed,
			Failure: types.Failure{Message: "e2e.yaml: target \"gke\" is not one of sim, kube, kind"}})
	}
	q, err := Build(r, meta(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(q.SuiteFailures) != 2 || !strings.Contains(q.SuiteFailures[1], `target "gke"`) {
		t.Errorf("suite failures %q", q.SuiteFailures)
	}
}

func TestUnreadableEntryIsListedNotFatal(t *testing.T) {
	r := syntheticReport(t)
	r.SpecReports[1].ReportEntries = append(r.SpecReports[1].ReportEntries, types.ReportEntry{Name: EntrySplit, Value: types.ReportEntryValue{AsJSON: `"not a split"`}})
	q, err := Build(r, meta(t))
	if err != nil {
		t.Fatal(err)
	}
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
	q, err := Build(r, meta(t))
	if err != nil {
		t.Fatal(err)
	}
	c := q.Environment.Cost
	if c.ModelDeployments != 2 || c.Counted != 2 || c.EnginePodsStarted == nil || *c.EnginePodsStarted != 5 || *c.EnginePodsReady != 4 || *c.AcceleratorSeconds != 42.5 {
		t.Errorf("cost %+v", c)
	}
	r.SpecReports[1].ReportEntries = append(r.SpecReports[1].ReportEntries,
		remote(t, entry(DeploymentCost{Name: "c", Pair: "vllm-router+vLLM", Error: "sim: engine Pods are not counted yet"})))
	if q, err = Build(r, meta(t)); err != nil {
		t.Fatal(err)
	}
	c = q.Environment.Cost
	if c.ModelDeployments != 3 || c.Counted != 2 || c.EnginePodsStarted != nil || c.AcceleratorSeconds != nil ||
		len(c.NotCounted) != 1 || c.NotCounted[0] != "sim: engine Pods are not counted yet" {
		t.Errorf("a deployment without a cost must leave the figures out, not add zeros: %+v", c)
	}
	md := Markdown(q)
	if !strings.Contains(md, "| Engine Pods, accelerator-seconds | not counted: the target counted 2 of 3 deployments (sim: engine Pods are not counted yet) |") {
		t.Errorf("markdown cost rows:\n%s", md)
	}
	b, _ := json.Marshal(q.Environment.Cost)
	if !strings.Contains(string(b), `"modelDeploymentsCreated":3`) || strings.Contains(string(b), "enginePodsStarted") {
		t.Errorf("report.json cost %s", b)
	}
}

func TestEntryNamesMatchTheirTypes(t *testing.T) {
	for name, e := range map[string]Entry{EntryClaim: Claim{}, EntrySplit: Split{}, EntryMetricDelta: MetricDelta{}, EntryBanner: Banner{},
		EntrySeries: Series{}, EntryAdmission: Admission{}, EntryRouterExit: RouterExit{}, EntryDeploymentCost: DeploymentCost{},
		EntryPickerSeed: PickerSeed{}} {
		if e.EntryName() != name {
			t.Errorf("%T.EntryName() = %s, want %s", e, e.EntryName(), name)
		}
	}
}
