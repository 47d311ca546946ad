package report

// The shape of report.json, versioned by SchemaVersion: every type the
// file holds, and nothing that computes or renders it (build.go reads
// Ginkgo's report into it; markdown.go, html.go and junit.go render it).
// A reader of report.json (the baseline diff, hack/gpucheck, the apiserver
// tier) needs only these types, and reads the file with Load or Parse
// (read.go). Change a JSON field here and bump SchemaVersion.

import (
	"time"
)

// Results of a spec, a claim row and the run.
const (
	ResultPass = "PASS"
	ResultFail = "FAIL"
	ResultSkip = "SKIP"
	// ResultNotApplicable is a spec or claim row whose claim the operator's
	// docs say does not apply to the pair (a skip that is not a shortfall).
	ResultNotApplicable = "N/A"
	ResultNotRun        = "NOT RUN"
)

// Outcomes of the run, as the headline says them.
const (
	OutcomePassed      = "passed"
	OutcomeFailed      = "failed"
	OutcomeInterrupted = "interrupted"
	// OutcomeDidNotRun: the suite stopped before any spec (a config error,
	// an unreachable cluster, a failed BeforeSuite).
	OutcomeDidNotRun = "did-not-run"
)

// SchemaVersion is the version of report.json's shape. Readers (the
// baseline diff, hack/gpucheck) refuse a report whose version they do not
// know. Version 1 had no schemaVersion field.
const SchemaVersion = 2

// Report is report.json: the qualification report as data. Markdown, HTML
// and JUnit are rendered from it alone.
type Report struct {
	SchemaVersion int    `json:"schemaVersion"`
	APIVersion    string `json:"apiVersion"`
	Kind          string `json:"kind"`
	Suite         string `json:"suite"`
	// Headline is the report's first line: the target and the coverage, or
	// why the suite did not run.
	Headline string `json:"headline"`
	// Outcome is one of the Outcome* values.
	Outcome string `json:"outcome"`
	// Result is PASS only when the suite succeeded.
	Result string `json:"result"`
	// Interrupted marks a partial report (Ctrl-C, the suite timeout).
	Interrupted bool      `json:"interrupted,omitempty"`
	StartTime   time.Time `json:"startTime"`
	EndTime     time.Time `json:"endTime"`
	WallTime    string    `json:"wallTime"`
	WallSeconds float64   `json:"wallSeconds"`
	// SuiteFailures are failures outside any spec, in plain text.
	SuiteFailures []string    `json:"suiteFailures,omitempty"`
	Environment   Environment `json:"environment"`
	Statistics    Statistics  `json:"statistics"`
	// Pairs are the matrix's columns, in documented order.
	Pairs  []string     `json:"pairs"`
	Claims []ClaimTable `json:"claims"`
	// Verdicts are one line per pair over every claim.
	Verdicts []Verdict `json:"verdicts"`
	// Splits lists every measured split; those of a claim row also appear in it.
	Splits []SplitResult `json:"splits"`
	// OtherSplits are splits of specs outside the documented claim tables.
	OtherSplits []SplitResult `json:"otherSplits,omitempty"`
	// Series are the metric series the evidence names, per claim and pair.
	Series []SeriesSeen `json:"series,omitempty"`
	// Sweeps are the concurrency sweeps measured (split against concurrency).
	Sweeps []SweepResult `json:"sweeps,omitempty"`
	// DriverOverhead is the traffic driver's measured share of the sweeps'
	// latencies: the bound each level states.
	DriverOverhead *DriverOverhead `json:"driverOverhead,omitempty"`
	Specs          []SpecResult    `json:"specs"`
	// Baseline is the comparison with an earlier run (make qualify BASELINE=).
	Baseline *Diff `json:"baseline,omitempty"`

	// linkBase prefixes the docs/ links (see Meta.RepoRoot).
	linkBase string
}

// Environment is the block at the top of the report.
type Environment struct {
	Target string `json:"target"`
	// Cluster names the cluster (kube, kind): its kubeconfig context or
	// API server.
	Cluster           string `json:"cluster,omitempty"`
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	OperatorVersion   string `json:"operatorVersion,omitempty"`
	GPU               string `json:"gpu,omitempty"`
	Model             string `json:"model,omitempty"`
	RouterImage       string `json:"routerImage,omitempty"`
	// RouterCode is which code ran as each pair's router, where the target
	// runs routers itself (routercode.go).
	RouterCode  []PairRouterCode `json:"routerCode,omitempty"`
	Engines     []EngineInfo     `json:"engines,omitempty"`
	Routers     []string         `json:"routers,omitempty"`
	Replicas    int32            `json:"replicas,omitempty"`
	Requests    int              `json:"requests,omitempty"`
	ConfigFile  string           `json:"configFile,omitempty"`
	GinkgoNodes int              `json:"ginkgoNodes"`
	LabelFilter string           `json:"labelFilter,omitempty"`
	RandomSeed  int64            `json:"randomSeed"`
	Notes       []string         `json:"notes,omitempty"`
	// Cost is what the run's deployments held of the target.
	Cost CostSummary `json:"cost"`
	// Edits are the framework's edits of router args, and the guard's
	// fallback when one replaced an engine Pod.
	Edits EditSummary `json:"edits"`
	// Block is the environment as the report shows it: ordered, each fact
	// once.
	Block []EnvRow `json:"block"`
}

// EnvRow is one line of the environment block.
type EnvRow struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CostSummary adds up the DeploymentCost entries of the run: on a GPU
// cluster every engine Pod is an image pull and a model load.
type CostSummary struct {
	ModelDeployments int `json:"modelDeploymentsCreated"`
	// Counted is how many of those the target reported a cost for. The
	// figures below are set only when every one was counted: a partial sum
	// would read as the run's cost.
	Counted            int      `json:"counted"`
	EnginePodsStarted  *int     `json:"enginePodsStarted,omitempty"`
	EnginePodsReady    *int     `json:"enginePodsReady,omitempty"`
	AcceleratorSeconds *float64 `json:"acceleratorSeconds,omitempty"`
	// AcceleratorSecondsNotApplicable says why no accelerator-seconds are
	// given on a target that holds none (the simulator): not a measured 0.
	AcceleratorSecondsNotApplicable string `json:"acceleratorSecondsNotApplicable,omitempty"`
	// NotCounted says why figures are missing, one line per distinct reason.
	NotCounted []string `json:"notCounted,omitempty"`
	// Projected is what the run's plan projected under the cost model of
	// e2e.yaml (as make plan prints it), to set beside the figures above.
	Projected *CostProjection `json:"projected,omitempty"`
}

// EngineInfo is one engine's version and image.
type EngineInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Image   string `json:"image,omitempty"`
}

// Statistics counts specs by result. Skipped includes NotApplicable.
type Statistics struct {
	Total         int `json:"total"`
	Passed        int `json:"passed"`
	Failed        int `json:"failed"`
	Skipped       int `json:"skipped"`
	NotApplicable int `json:"notApplicable"`
	// NotSelected are skipped specs the filters left out.
	NotSelected int `json:"notSelected"`
	Pending     int `json:"pending"`
}

// ClaimTable is one documented claim: a row per pair.
type ClaimTable struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Kind is documented (the routing page), extended (derived from the
	// routers' algorithms) or resilience (a fault and its derived bounds).
	Kind string `json:"kind"`
	// Source is expect.yaml's source: docs/<page>.md#<anchor>, comma-separated.
	Source string `json:"source"`
	// Sources are Source's links, one each.
	Sources []string   `json:"sources"`
	Anchor  string     `json:"anchor"`
	Result  string     `json:"result"`
	Rows    []ClaimRow `json:"rows"`
}

// ClaimRow is what the operator's docs say beside what this run measured,
// for one pair: one cell of the matrix.
type ClaimRow struct {
	Pair string `json:"pair"`
	// Anchor is the row's id in the HTML page; the matrix cell links to it.
	Anchor string `json:"anchor"`
	// Expected is what the operator's docs say, figures from their own GPU
	// run included (never this run's).
	Expected string `json:"expected"`
	// Measured is what this run measured.
	Measured []string `json:"measured,omitempty"`
	Result   string   `json:"result"`
	Reasons  []string `json:"reasons,omitempty"`
	Specs    []string `json:"specs,omitempty"`
	// Splits are the splits measured for this row.
	Splits []SplitResult `json:"splits,omitempty"`
	// Charts are drawn in the row: its splits and any other Charter evidence.
	Charts []Chart `json:"charts,omitempty"`
	// Evidence is every entry of the row's specs, one line each.
	Evidence []string `json:"evidence,omitempty"`
}

// SplitResult is a Split entry with the result of the spec that measured it.
type SplitResult struct {
	Split
	Spec   string `json:"spec"`
	Result string `json:"result"`
}

// SeriesSeen is one metric series some evidence of a claim and pair names.
type SeriesSeen struct {
	Claim string `json:"claim"`
	Pair  string `json:"pair"`
	// Key is "metric{label,...}", label names only.
	Key string `json:"key"`
}

// SpecResult is one spec.
type SpecResult struct {
	Name string `json:"name"`
	// Text is the spec's text without its pair.
	Text   string   `json:"text,omitempty"`
	Claim  string   `json:"claim,omitempty"`
	Pair   string   `json:"pair,omitempty"`
	Labels []string `json:"labels"`
	Result string   `json:"result"`
	State  string   `json:"state"`
	// Reason is the one-line cause of a failure or skip, in plain text.
	Reason string `json:"reason,omitempty"`
	// Failure is the whole failure message, in plain text.
	Failure        string   `json:"failure,omitempty"`
	Location       string   `json:"location,omitempty"`
	RunTimeSeconds float64  `json:"runTimeSeconds"`
	Process        int      `json:"process"`
	Entries        []string `json:"entries,omitempty"`
}

// Verdicts of a pair besides ResultPass and ResultFail (a pair passes or
// fails as a spec does).
const (
	VerdictIncomplete   = "INCOMPLETE"
	VerdictNotQualified = "NOT QUALIFIED"
)

// Verdict is one pair's verdict over every claim: the line a release
// manager signs per pair.
type Verdict struct {
	Pair   string `json:"pair"`
	Result string `json:"result"`
	Line   string `json:"line"`
}

// SplitTolerance is how far a replica's share of a split may move between
// two runs before the diff lists it: 5 percentage points of the split's
// requests. Shares are compared largest first, because Pod names (and which
// replica a cache-aware router picks first) change from run to run.
const SplitTolerance = 0.05

// Diff is a run compared with an earlier one (make qualify BASELINE=).
type Diff struct {
	// Baseline names the earlier run: its bundle and headline.
	Baseline         string `json:"baseline"`
	BaselineHeadline string `json:"baselineHeadline"`
	// Tolerance is SplitTolerance, stated with the diff.
	Tolerance float64 `json:"splitTolerance"`
	// Claims are matrix cells whose result changed.
	Claims []ResultChange `json:"claims,omitempty"`
	// Specs are specs whose result changed, appeared or vanished.
	Specs []ResultChange `json:"specs,omitempty"`
	// Splits moved beyond the tolerance, or measured in one run only.
	Splits []SplitChange `json:"splits,omitempty"`
	// SeriesAppeared and SeriesVanished are metric series per claim and
	// pair, present in one run's evidence only.
	SeriesAppeared []SeriesSeen `json:"seriesAppeared,omitempty"`
	SeriesVanished []SeriesSeen `json:"seriesVanished,omitempty"`
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool {
	return len(d.Claims)+len(d.Specs)+len(d.Splits)+len(d.SeriesAppeared)+len(d.SeriesVanished) == 0
}

// ResultChange is one result before and after; "absent" when the run did
// not have it.
type ResultChange struct {
	Name   string `json:"name"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// SplitChange is one split's shares before and after.
type SplitChange struct {
	Claim string `json:"claim"`
	Pair  string `json:"pair"`
	Title string `json:"title"`
	// Before and After are the counts as the report prints them ("60/60");
	// "absent" when the run did not measure it.
	Before string `json:"before"`
	After  string `json:"after"`
	// MaxShift is the largest change of a share, 0..1 (1 when absent).
	MaxShift float64 `json:"maxShift"`
}

// Absent stands for a result or split one of the runs does not have.
const Absent = "absent"

// Chart is a horizontal bar chart: one bar per labelled value. Any entry
// that implements Charter is drawn in its claim row.
type Chart struct {
	// Title is drawn above the bars, wrapped, never cut.
	Title string `json:"title"`
	// Caption is a line under the chart: what was counted and how.
	Caption string `json:"caption,omitempty"`
	// Scale is the value that fills the bar width (e.g. the requests sent,
	// so an all-on-one split fills it); 0 scales to the largest bar.
	Scale float64 `json:"scale,omitempty"`
	// Unit follows each value, e.g. "ms".
	Unit string `json:"unit,omitempty"`
	Bars []Bar  `json:"bars"`
}

// Bar is one labelled value.
type Bar struct {
	// Label is the full name (a Pod name, a concurrency level).
	Label string `json:"label"`
	// Detail is a second, smaller line under the label (an address).
	Detail string  `json:"detail,omitempty"`
	Value  float64 `json:"value"`
}

// SweepResult is a Sweep entry with the result of the spec that measured it.
type SweepResult struct {
	Sweep
	Spec   string `json:"spec"`
	Result string `json:"result"`
}
