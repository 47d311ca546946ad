package report

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

// Results of a spec, a claim row and the run.
const (
	ResultPass   = "PASS"
	ResultFail   = "FAIL"
	ResultSkip   = "SKIP"
	ResultNotRun = "NOT RUN"
)

// Meta is what the report needs beyond Ginkgo's report: the target's
// description and the config the run used.
type Meta struct {
	Environment clusters.Environment
	Config      *config.Config
}

// Report is report.json: the qualification report as data.
type Report struct {
	APIVersion    string       `json:"apiVersion"`
	Kind          string       `json:"kind"`
	Suite         string       `json:"suite"`
	Result        string       `json:"result"`
	StartTime     time.Time    `json:"startTime"`
	EndTime       time.Time    `json:"endTime"`
	WallTime      string       `json:"wallTime"`
	WallSeconds   float64      `json:"wallSeconds"`
	SuiteFailures []string     `json:"suiteFailures,omitempty"`
	Environment   Environment  `json:"environment"`
	Statistics    Statistics   `json:"statistics"`
	Claims        []ClaimTable `json:"claims"`
	// Splits lists every measured split; those of a claim row also appear in it.
	Splits []SplitResult `json:"splits"`
	// OtherSplits are splits of specs outside the documented claim tables.
	OtherSplits []SplitResult `json:"otherSplits,omitempty"`
	// Sweeps are the concurrency sweeps measured (split against concurrency).
	Sweeps []SweepResult `json:"sweeps,omitempty"`
	Specs  []SpecResult  `json:"specs"`
}

// Environment is the block at the top of the report.
type Environment struct {
	Target            string       `json:"target"`
	KubernetesVersion string       `json:"kubernetesVersion,omitempty"`
	OperatorVersion   string       `json:"operatorVersion,omitempty"`
	GPU               string       `json:"gpu,omitempty"`
	Model             string       `json:"model,omitempty"`
	RouterImage       string       `json:"routerImage,omitempty"`
	Engines           []EngineInfo `json:"engines,omitempty"`
	Routers           []string     `json:"routers,omitempty"`
	Replicas          int32        `json:"replicas,omitempty"`
	Requests          int          `json:"requests,omitempty"`
	ConfigFile        string       `json:"configFile,omitempty"`
	GinkgoNodes       int          `json:"ginkgoNodes"`
	LabelFilter       string       `json:"labelFilter,omitempty"`
	RandomSeed        int64        `json:"randomSeed"`
	Notes             []string     `json:"notes,omitempty"`
	// Cost is what the run's deployments held of the target.
	Cost CostSummary `json:"cost"`
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
	// NotCounted says why figures are missing, one line per distinct reason.
	NotCounted []string `json:"notCounted,omitempty"`
}

// EngineInfo is one engine's version and image.
type EngineInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Image   string `json:"image,omitempty"`
}

// Statistics counts specs by result.
type Statistics struct {
	Total   int `json:"total"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Pending int `json:"pending"`
}

// ClaimTable is one documented claim: a row per pair.
type ClaimTable struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Kind is documented (the routing page), extended (derived from the
	// routers' algorithms) or resilience (a fault and its derived bounds).
	Kind   string     `json:"kind"`
	Source string     `json:"source"`
	Result string     `json:"result"`
	Rows   []ClaimRow `json:"rows"`
}

// ClaimRow is the documented outcome beside the measured one for one pair.
type ClaimRow struct {
	Pair     string   `json:"pair"`
	Expected string   `json:"expected"`
	Measured []string `json:"measured,omitempty"`
	Result   string   `json:"result"`
	Reasons  []string `json:"reasons,omitempty"`
	Specs    []string `json:"specs,omitempty"`
	// Splits are the splits measured for this row, drawn beside it.
	Splits []SplitResult `json:"splits,omitempty"`
}

// SplitResult is a Split entry with the result of the spec that measured it.
type SplitResult struct {
	Split
	Spec   string `json:"spec"`
	Result string `json:"result"`
}

// SpecResult is one spec.
type SpecResult struct {
	Name           string   `json:"name"`
	Claim          string   `json:"claim,omitempty"`
	Pair           string   `json:"pair,omitempty"`
	Labels         []string `json:"labels"`
	Result         string   `json:"result"`
	State          string   `json:"state"`
	Reason         string   `json:"reason,omitempty"`
	Location       string   `json:"location,omitempty"`
	RunTimeSeconds float64  `json:"runTimeSeconds"`
	Process        int      `json:"process"`
	Entries        []string `json:"entries,omitempty"`

	claimIndex, pairIndex int
	splits                []Split
	claims                []Claim
	sweeps                []Sweep
}

// Build turns Ginkgo's report into the qualification report. It never
// fails on a malformed entry: the entry is listed as a problem on its spec.
func Build(r types.Report, meta Meta) (*Report, error) {
	expect, err := fixtures.Expectations()
	if err != nil {
		return nil, err
	}
	out := &Report{
		APIVersion:  "routing-conformance.gpustack.ai/v1",
		Kind:        "QualificationReport",
		Suite:       r.SuiteDescription,
		Result:      ResultFail,
		StartTime:   r.StartTime.UTC(),
		EndTime:     r.EndTime.UTC(),
		WallTime:    r.RunTime.Round(time.Millisecond).String(),
		WallSeconds: r.RunTime.Seconds(),
		Environment: environment(r, meta),
	}
	if r.SuiteSucceeded {
		out.Result = ResultPass
	}
	out.SuiteFailures = append(out.SuiteFailures, r.SpecialSuiteFailureReasons...)
	out.Environment.Cost = costSummary(r)
	for _, sr := range r.SpecReports {
		if !sr.LeafNodeType.Is(types.NodeTypeIt) {
			// Suite-level nodes (BeforeSuite, ReportAfterSuite...) only matter when they fail.
			if sr.State.Is(types.SpecStateFailureStates) {
				// Every process reports the same setup failure once.
				out.SuiteFailures = appendUnique(out.SuiteFailures, fmt.Sprintf("%s: %s", sr.LeafNodeType, firstLines(sr.Failure.Message, 3)))
			}
			continue
		}
		s := specResult(sr)
		out.Specs = append(out.Specs, s)
		switch s.Result {
		case ResultPass:
			out.Statistics.Passed++
		case ResultFail:
			out.Statistics.Failed++
		case ResultSkip:
			out.Statistics.Skipped++
		}
		if sr.State == types.SpecStatePending {
			out.Statistics.Pending++
		}
	}
	out.Statistics.Total = len(out.Specs)
	slices.SortStableFunc(out.Specs, func(a, b SpecResult) int {
		return cmp.Or(cmp.Compare(a.claimIndex, b.claimIndex), cmp.Compare(a.pairIndex, b.pairIndex), strings.Compare(a.Name, b.Name))
	})
	for _, s := range out.Specs {
		for _, sp := range s.splits {
			sr := SplitResult{Split: sp, Spec: s.Name, Result: s.Result}
			out.Splits = append(out.Splits, sr)
			if s.Claim == "" || s.pairIndex == len(fixtures.DocumentedPairs) {
				out.OtherSplits = append(out.OtherSplits, sr)
			}
		}
		for _, sw := range s.sweeps {
			out.Sweeps = append(out.Sweeps, SweepResult{Sweep: sw, Spec: s.Name, Result: s.Result})
		}
	}
	for _, name := range expect.Names() {
		c, _ := expect.Claim(name)
		out.Claims = append(out.Claims, claimTable(c, out.Specs))
	}
	return out, nil
}

func environment(r types.Report, meta Meta) Environment {
	env := Environment{
		Target:            meta.Environment.Target,
		KubernetesVersion: meta.Environment.KubernetesVersion,
		OperatorVersion:   meta.Environment.OperatorVersion,
		GPU:               meta.Environment.GPUProduct,
		RouterImage:       meta.Environment.RouterImage,
		GinkgoNodes:       r.SuiteConfig.ParallelTotal,
		LabelFilter:       r.SuiteConfig.LabelFilter,
		RandomSeed:        r.SuiteConfig.RandomSeed,
		Notes:             slices.Clone(meta.Environment.Notes),
	}
	if c := meta.Config; c != nil {
		if env.Target == "" {
			env.Target = c.Target
		}
		env.Model = c.Model.Name
		if env.RouterImage == "" {
			env.RouterImage = c.RouterImage
		}
		for _, e := range c.Engines {
			image := e.Image
			if img := meta.Environment.EngineImages[e.Name]; img != "" {
				image = img
			}
			env.Engines = append(env.Engines, EngineInfo{Name: e.Name, Version: e.Version, Image: image})
		}
		for _, rt := range c.Routers {
			env.Routers = append(env.Routers, rt.Name)
		}
		env.Replicas = c.Replicas
		env.Requests = c.Traffic.Requests
		env.ConfigFile = c.File()
	}
	slices.SortFunc(env.Engines, func(a, b EngineInfo) int { return strings.Compare(a.Name, b.Name) })
	sort.Strings(env.Routers)
	return env
}

// specResult reads one spec: its claim and pair from labels, its result and
// reason, and its evidence entries.
func specResult(sr types.SpecReport) SpecResult {
	claims := fixtures.ClaimNames()
	labels := slices.Clone(sr.Labels())
	sort.Strings(labels)
	s := SpecResult{
		Name:           sr.FullText(),
		Labels:         labels,
		State:          sr.State.String(),
		RunTimeSeconds: sr.RunTime.Seconds(),
		Process:        sr.ParallelProcess,
		claimIndex:     len(claims),
		pairIndex:      len(fixtures.DocumentedPairs),
	}
	var router, engine string
	for _, l := range labels {
		key, value, _ := strings.Cut(l, ":")
		switch strings.ToLower(key) {
		case "feature":
			if i := indexFold(claims, value); i >= 0 {
				s.Claim, s.claimIndex = claims[i], i
			}
		case "router":
			router = value
		case "engine":
			engine = value
		}
	}
	for i, p := range fixtures.DocumentedPairs {
		if strings.EqualFold(p.Router, router) && strings.EqualFold(p.Engine, engine) {
			s.Pair, s.pairIndex = p.String(), i
		}
	}
	if s.Pair == "" && router != "" && engine != "" {
		s.Pair = router + "+" + engine
	}
	switch {
	case sr.State == types.SpecStatePassed:
		s.Result = ResultPass
	case sr.State.Is(types.SpecStateFailureStates):
		s.Result = ResultFail
		s.Reason = firstLines(sr.Failure.Message, 6)
		if loc := sr.Failure.Location; loc.FileName != "" {
			s.Location = fmt.Sprintf("%s:%d", shortPath(loc.FileName), loc.LineNumber)
		}
	case sr.State == types.SpecStatePending:
		s.Result = ResultSkip
		s.Reason = "pending: the spec is not written yet"
	default:
		s.Result = ResultSkip
		s.Reason = firstLines(sr.Failure.Message, 3)
		if s.Reason == "" {
			s.Reason = "not selected in this run (label filter, focus or skip)"
		}
	}
	for _, e := range sr.ReportEntries {
		v, err := decodeKnown(e)
		switch x := v.(type) {
		case *Split:
			if err == nil {
				s.splits = append(s.splits, *x)
			}
		case *Claim:
			if err == nil {
				s.claims = append(s.claims, *x)
			}
		case *Sweep:
			if err == nil {
				s.sweeps = append(s.sweeps, *x)
			}
		}
		s.Entries = append(s.Entries, entryLine(e, v, err))
	}
	return s
}

// decodeKnown decodes an entry recorded under one of the Entry* names into a
// pointer to its type; other entries give nil.
func decodeKnown(e types.ReportEntry) (any, error) {
	var v any
	switch e.Name {
	case EntryClaim:
		v = &Claim{}
	case EntrySplit:
		v = &Split{}
	case EntryMetricDelta:
		v = &MetricDelta{}
	case EntryBanner:
		v = &Banner{}
	case EntrySeries:
		v = &Series{}
	case EntryAdmission:
		v = &Admission{}
	case EntryRouterExit:
		v = &RouterExit{}
	case EntryDeploymentCost:
		v = &DeploymentCost{}
	case EntryDisruption:
		v = &Disruption{}
	case EntryRouterPods:
		v = &RouterPods{}
	case EntrySweep:
		v = &Sweep{}
	default:
		return nil, nil
	}
	return v, decodeEntry(e, v)
}

// entryLine renders any entry as one readable line for the spec list, from
// what decodeKnown made of it.
func entryLine(e types.ReportEntry, v any, err error) string {
	switch {
	case err != nil && (e.Name == EntrySplit || e.Name == EntryClaim):
		// Missing from the claim tables and charts too.
		return fmt.Sprintf("unreadable %s entry: %v", e.Name, err)
	case err != nil:
		return fmt.Sprintf("%s: unreadable: %v", e.Name, err)
	case v == nil:
		return e.Name + ": " + firstLines(e.Value.String(), 1)
	}
	switch x := v.(type) {
	case *Claim:
		return fmt.Sprintf("claim: expected %s; measured %s", x.Expected, x.Measured)
	case *Split:
		return fmt.Sprintf("split %s: %s by %s (%d requests, %d failed)", x.Title, x.Counts(), x.Source, x.Requests, x.Failures)
	case *MetricDelta:
		return "metric " + x.String()
	case *Sweep:
		return "sweep " + x.String()
	case *Banner:
		return "banner: " + x.Line
	case *Series:
		return fmt.Sprintf("series %s{%s}: %s (replicas %s)", x.Metric, x.Label, strings.Join(x.Values, ", "), strings.Join(x.Replicas, ", "))
	case *Admission:
		if x.Refused {
			return fmt.Sprintf("admission %q refused: %s: %s", strings.Join(x.Args, " "), x.Field, x.Message)
		}
		return fmt.Sprintf("admission %q admitted", strings.Join(x.Args, " "))
	case *RouterExit:
		code := "none"
		if x.ExitCode != nil {
			code = fmt.Sprint(*x.ExitCode)
		}
		return fmt.Sprintf("router with --policy %s: exit %s, restarts %d, ready %v, RouterReady %s", x.Value, code, x.Restarts, x.Ready, x.RouterReady)
	case *Disruption:
		return "disruption " + x.String()
	case *RouterPods:
		return "router Pods " + x.String()
	case *DeploymentCost:
		if x.Cost == nil {
			return fmt.Sprintf("deployment %s: cost not counted: %s", x.Name, x.Error)
		}
		return fmt.Sprintf("deployment %s: %d engine Pods started, %d Ready, %s accelerator-seconds", x.Name,
			x.Cost.EnginePodsStarted, x.Cost.EnginePodsReady, formatNumber(x.Cost.AcceleratorSeconds))
	}
	return e.Name
}

// costSummary adds up every DeploymentCost entry of the run, whichever
// process and node recorded it.
func costSummary(r types.Report) CostSummary {
	var out CostSummary
	var started, ready int
	var accel float64
	for _, sr := range r.SpecReports {
		for _, e := range sr.ReportEntries {
			if e.Name != EntryDeploymentCost {
				continue
			}
			var c DeploymentCost
			if err := decodeEntry(e, &c); err != nil {
				out.NotCounted = appendUnique(out.NotCounted, "unreadable deployment-cost entry: "+err.Error())
				continue
			}
			out.ModelDeployments++
			if c.Cost == nil {
				out.NotCounted = appendUnique(out.NotCounted, c.Error)
				continue
			}
			out.Counted++
			started += c.Cost.EnginePodsStarted
			ready += c.Cost.EnginePodsReady
			accel += c.Cost.AcceleratorSeconds
		}
	}
	if len(out.NotCounted) == 0 {
		out.EnginePodsStarted, out.EnginePodsReady, out.AcceleratorSeconds = &started, &ready, &accel
	}
	return out
}

func claimTable(c fixtures.ClaimExpectations, specs []SpecResult) ClaimTable {
	t := ClaimTable{Name: c.Name, Title: c.Title, Kind: c.ClaimKind(), Source: c.Source}
	for _, p := range fixtures.DocumentedPairs {
		row := ClaimRow{Pair: p.String()}
		for _, e := range c.Pairs {
			if e.Pair == p.String() {
				row.Expected = e.Summary
			}
		}
		var results []string
		for _, s := range specs {
			if s.Claim != c.Name || s.Pair != p.String() {
				continue
			}
			row.Specs = append(row.Specs, s.Name)
			results = append(results, s.Result)
			for _, cl := range s.claims {
				row.Measured = append(row.Measured, cl.Measured)
			}
			for _, sp := range s.splits {
				row.Splits = append(row.Splits, SplitResult{Split: sp, Spec: s.Name, Result: s.Result})
			}
			if s.Reason != "" && s.Result != ResultPass {
				row.Reasons = appendUnique(row.Reasons, s.Reason)
			}
		}
		row.Result = overall(results)
		if row.Result == ResultNotRun {
			row.Reasons = []string{"no spec for this claim and pair ran in this suite"}
		}
		t.Rows = append(t.Rows, row)
	}
	var rows []string
	for _, r := range t.Rows {
		rows = append(rows, r.Result)
	}
	t.Result = overall(rows)
	return t
}

// overall is the result of a claim row from its specs' results, or of a
// claim from its rows': FAIL if any failed, else PASS if any passed, else
// SKIP if any was skipped, else NOT RUN.
func overall(results []string) string {
	for _, r := range []string{ResultFail, ResultPass, ResultSkip} {
		if slices.Contains(results, r) {
			return r
		}
	}
	return ResultNotRun
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func indexFold(list []string, s string) int {
	for i, v := range list {
		if strings.EqualFold(v, s) {
			return i
		}
	}
	return -1
}

// firstLines keeps the first n non-empty lines of s, trimmed.
func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) == "" {
			continue
		}
		if len(out) == n {
			out = append(out, "...")
			break
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func shortPath(p string) string {
	if i := strings.Index(p, "/suites/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func labelString(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
