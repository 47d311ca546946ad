package report

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

// Meta is what the report needs beyond Ginkgo's report: the target's
// description and the config the run used.
type Meta struct {
	Environment clusters.Environment
	Config      *config.Config
	// Target is the target asked for, used when the config did not load
	// (E2E_TARGET); empty: the config's or the environment's.
	Target string
	// RepoRoot is the repository the docs/ links point into; Write links
	// to it relative to the artifacts directory. Empty: links are written
	// relative to the repository root (docs/...).
	RepoRoot string
	// Projection is the run's projected cost, if the suite computed one.
	Projection *CostProjection
}

// NotSelected is the reason of a spec the label filter, focus or skip left
// out of the run.
const NotSelected = "not selected in this run (label filter, focus or skip)"

// Build turns Ginkgo's report into the qualification report. It never
// fails on a malformed entry: the entry is listed as a problem on its spec.
func Build(r types.Report, meta Meta) (*Report, error) {
	expect, err := fixtures.Expectations()
	if err != nil {
		return nil, err
	}
	out := &Report{
		SchemaVersion: SchemaVersion,
		APIVersion:    "routing-conformance.gpustack.ai/v1",
		Kind:          "QualificationReport",
		Suite:         r.SuiteDescription,
		Result:        ResultFail,
		StartTime:     r.StartTime.UTC(),
		EndTime:       r.EndTime.UTC(),
		WallTime:      r.RunTime.Round(time.Millisecond).String(),
		WallSeconds:   r.RunTime.Seconds(),
		Environment:   environment(r, meta),
	}
	if r.SuiteSucceeded {
		out.Result = ResultPass
	}
	var setupFailed bool
	for _, reason := range r.SpecialSuiteFailureReasons {
		if interruption(reason) {
			out.Interrupted = true
		}
		out.SuiteFailures = appendUnique(out.SuiteFailures, suiteReason(reason))
	}
	out.Environment.Cost = costSummary(r, out.Environment.Target)
	out.Environment.Cost.Projected = meta.Projection
	out.Environment.Edits = editSummary(r)
	// Suite-level nodes (BeforeSuite, ReportAfterSuite...) only matter when
	// they fail; read first, as they change what an unrun spec's reason is.
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType.Is(types.NodeTypeIt) || !sr.State.Is(types.SpecStateFailureStates) || sr.State.Is(types.SpecStateInterrupted) {
			continue
		}
		if sr.LeafNodeType.Is(types.NodeTypeBeforeSuite | types.NodeTypeSynchronizedBeforeSuite) {
			setupFailed = true
		}
		out.SuiteFailures = appendUnique(out.SuiteFailures, suiteFailureLine(sr))
	}
	chosen := selection(r.SuiteConfig)
	var specs []*specRead
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType.Is(types.NodeTypeIt) {
			specs = append(specs, specResult(sr, expect, runState{interrupted: out.Interrupted, setupFailed: setupFailed, selected: chosen(sr)}))
		}
	}
	slices.SortStableFunc(specs, func(a, b *specRead) int {
		return cmp.Or(cmp.Compare(a.claimIndex, b.claimIndex), cmp.Compare(a.pairIndex, b.pairIndex), strings.Compare(a.Name, b.Name))
	})
	for _, s := range specs {
		out.Specs = append(out.Specs, s.SpecResult)
	}
	out.SuiteFailures = dropEchoes(out.SuiteFailures)
	out.Statistics = statistics(out.Specs, r)
	seen := map[SeriesSeen]bool{}
	for _, s := range specs {
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
		for _, k := range s.series {
			if ss := (SeriesSeen{Claim: s.Claim, Pair: s.Pair, Key: k}); !seen[ss] {
				seen[ss] = true
				out.Series = append(out.Series, ss)
			}
		}
	}
	slices.SortFunc(out.Series, func(a, b SeriesSeen) int {
		return cmp.Or(strings.Compare(a.Claim, b.Claim), strings.Compare(a.Pair, b.Pair), strings.Compare(a.Key, b.Key))
	})
	for _, p := range fixtures.DocumentedPairs {
		out.Pairs = append(out.Pairs, p.String())
	}
	for _, name := range expect.Names() {
		c, _ := expect.Claim(name)
		out.Claims = append(out.Claims, claimTable(c, specs, out.Interrupted || setupFailed))
	}
	switch {
	case setupFailed || (len(out.SuiteFailures) > 0 && out.Statistics.Passed+out.Statistics.Failed == 0 && !out.Interrupted):
		out.Outcome = OutcomeDidNotRun
	case out.Interrupted:
		out.Outcome = OutcomeInterrupted
	case r.SuiteSucceeded:
		out.Outcome = OutcomePassed
	default:
		out.Outcome = OutcomeFailed
	}
	out.Headline = headline(out)
	out.Verdicts = verdicts(out)
	out.Environment.Block = envBlock(out)
	return out, nil
}

// interruption reports whether Ginkgo's special failure reason means the
// run was cut short: Ctrl-C, another process's interrupt, the suite timeout.
func interruption(reason string) bool {
	return strings.HasPrefix(reason, "Interrupted") || reason == "Suite Timeout Elapsed"
}

// suiteReason words Ginkgo's special failure reasons for a release manager.
func suiteReason(reason string) string {
	switch {
	case reason == "Interrupted by User":
		return "interrupted by the user (Ctrl-C): the report is partial"
	case strings.HasPrefix(reason, "Interrupted"):
		return strings.ToLower(reason[:1]) + reason[1:] + ": the report is partial"
	case reason == "Suite Timeout Elapsed":
		return "the suite timeout (GINKGO_TIMEOUT) elapsed: the report is partial"
	case reason == "Detected no specs ran and --fail-on-empty is set":
		return "no spec ran: the label filter, focus or skip selected none"
	}
	return stripANSI(reason)
}

// proc1Failed is in the message every other process gives for a
// SynchronizedBeforeSuite that failed on process 1.
const proc1Failed = "failed on Ginkgo parallel process #1"

// suiteFailureLine is a failed suite-level node's cause in plain text.
func suiteFailureLine(sr types.SpecReport) string {
	msg := strings.TrimSpace(stripANSI(sr.Failure.Message))
	what := "suite setup failed"
	if !sr.LeafNodeType.Is(types.NodeTypeBeforeSuite | types.NodeTypeSynchronizedBeforeSuite) {
		what = strings.Trim(sr.LeafNodeType.String(), "[]") + " failed"
		if sr.LeafNodeText != "" {
			what += " (" + sr.LeafNodeText + ")"
		}
	}
	return what + ": " + cmp.Or(firstLines(msg, 3), "no message")
}

// dropEchoes removes the other processes' "failed on process #1" when
// process 1's own cause is in the list.
func dropEchoes(list []string) []string {
	var own, out []string
	for _, l := range list {
		if !strings.Contains(l, proc1Failed) {
			own = append(own, l)
		}
	}
	if len(own) == len(list) || len(own) == 0 {
		return list
	}
	out = append(out, own...)
	return out
}

func statistics(specs []SpecResult, r types.Report) Statistics {
	st := Statistics{Total: len(specs)}
	for _, s := range specs {
		switch s.Result {
		case ResultPass:
			st.Passed++
		case ResultFail:
			st.Failed++
		case ResultNotApplicable:
			st.Skipped++
			st.NotApplicable++
		default:
			st.Skipped++
			if s.Reason == NotSelected {
				st.NotSelected++
			}
		}
	}
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType.Is(types.NodeTypeIt) && sr.State == types.SpecStatePending {
			st.Pending++
		}
	}
	return st
}

func environment(r types.Report, meta Meta) Environment {
	env := Environment{
		Target:            cmp.Or(meta.Environment.Target, meta.Target),
		Cluster:           meta.Environment.Cluster,
		KubernetesVersion: meta.Environment.KubernetesVersion,
		OperatorVersion:   meta.Environment.OperatorVersion,
		GPU:               meta.Environment.GPUProduct,
		RouterImage:       meta.Environment.RouterImage,
		RouterCode:        routerCode(meta.Environment),
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

// specRead is a spec as Build reads it: its result, and what its entries
// hold for the claim tables, charts and diffs.
type specRead struct {
	SpecResult
	claimIndex, pairIndex int
	splits                []Split
	claims                []Claim
	charts                []Chart
	series                []string
	sweeps                []Sweep
}

// specResult reads one spec: its claim and pair from labels, its result and
// reason, and its evidence entries.
func specResult(sr types.SpecReport, expect *fixtures.ExpectFile, run runState) *specRead {
	claims := expect.Names()
	labels := slices.Clone(sr.Labels())
	sort.Strings(labels)
	s := &specRead{SpecResult: SpecResult{
		Name:           sr.FullText(),
		Labels:         labels,
		State:          sr.State.String(),
		RunTimeSeconds: sr.RunTime.Seconds(),
		Process:        sr.ParallelProcess,
	}, claimIndex: len(claims), pairIndex: len(fixtures.DocumentedPairs)}
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
	// The pair has a column of its own wherever Text is shown.
	s.Text = strings.TrimSpace(strings.TrimPrefix(s.Name, s.Pair))
	msg := strings.TrimSpace(stripANSI(sr.Failure.Message))
	switch {
	case sr.State == types.SpecStatePassed:
		s.Result = ResultPass
	case sr.State.Is(types.SpecStateFailureStates):
		s.Result = ResultFail
		s.Failure = firstLines(msg, 40)
		s.Reason = firstLines(msg, 1)
		if sr.State == types.SpecStateInterrupted {
			s.Reason = "interrupted while running: " + cmp.Or(s.Reason, "the run was stopped")
		}
		if s.Reason == "" {
			s.Reason = sr.State.String() + " with no message"
		}
		if loc := sr.Failure.Location; loc.FileName != "" {
			s.Location = fmt.Sprintf("%s:%d", shortPath(loc.FileName), loc.LineNumber)
		}
	case sr.State == types.SpecStatePending:
		s.Result = ResultSkip
		s.Reason = "pending: the spec is not written yet"
	default:
		s.Result = ResultSkip
		s.Reason = firstLines(msg, 1)
		s.Failure = firstLines(msg, 40)
		if s.Reason == "" {
			switch {
			case !run.selected:
				s.Reason = NotSelected
			case run.setupFailed:
				s.Reason = "not run: the suite setup failed (see the headline)"
			case run.interrupted:
				s.Reason = "not run: the run was interrupted before this spec"
			default:
				s.Reason = "skipped without a reason"
			}
		}
		if s.Failure == s.Reason {
			s.Failure = ""
		}
		if notApplicable(expect, s.Claim, api.Pair{Router: router, Engine: engine}) && strings.HasPrefix(s.Reason, "not applicable") {
			s.Result = ResultNotApplicable
		}
	}
	for _, e := range sr.ReportEntries {
		v, err := decodeKnown(e)
		if err == nil {
			switch x := v.(type) {
			case *Split:
				s.splits = append(s.splits, *x)
			case *Claim:
				s.claims = append(s.claims, *x)
			}
			if c, ok := v.(Charter); ok {
				s.charts = append(s.charts, c.Charts()...)
			}
			if k, ok := v.(SeriesSource); ok {
				s.series = append(s.series, k.SeriesKeys()...)
			}
			if sw, ok := v.(*Sweep); ok {
				s.sweeps = append(s.sweeps, *sw)
			}
		}
		s.Entries = append(s.Entries, entryLine(e, v, err))
	}
	return s
}

// runState is what a spec's reason depends on beyond its own report.
type runState struct {
	interrupted, setupFailed bool
	// selected: the run's label filter, focus and skip chose the spec.
	selected bool
}

// selection tells the specs the run's filters chose from those they left
// out, as Ginkgo decides it: the label filter on the spec's labels, focus
// and skip regular expressions on its full text.
func selection(c types.SuiteConfig) func(types.SpecReport) bool {
	var filter types.LabelFilter
	if c.LabelFilter != "" {
		filter, _ = types.ParseLabelFilter(c.LabelFilter)
	}
	var focus, skip []*regexp.Regexp
	for _, f := range c.FocusStrings {
		if re, err := regexp.Compile(f); err == nil {
			focus = append(focus, re)
		}
	}
	for _, f := range c.SkipStrings {
		if re, err := regexp.Compile(f); err == nil {
			skip = append(skip, re)
		}
	}
	return func(sr types.SpecReport) bool {
		if filter != nil && !filter(sr.Labels()) {
			return false
		}
		text := sr.FullText()
		if len(focus) > 0 && !slices.ContainsFunc(focus, func(re *regexp.Regexp) bool { return re.MatchString(text) }) {
			return false
		}
		return !slices.ContainsFunc(skip, func(re *regexp.Regexp) bool { return re.MatchString(text) })
	}
}

// costSummary adds up every DeploymentCost entry of the run, whichever
// process and node recorded it. On the simulator no accelerator is held:
// its accelerator-seconds are not applicable rather than a measured 0.
func costSummary(r types.Report, target string) CostSummary {
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
	if target == config.TargetSim {
		out.AcceleratorSeconds = nil
		out.AcceleratorSecondsNotApplicable = "not applicable on the simulator: its engines hold no accelerator"
	}
	return out
}

// notApplicable reports whether expect.yaml rules claim out for p.
func notApplicable(expect *fixtures.ExpectFile, claim string, p api.Pair) bool {
	c, _ := expect.Claim(claim)
	row, ok := c.Row(p)
	return ok && row.NotApplicable != ""
}

func claimTable(c fixtures.ClaimEntry, specs []*specRead, cutShort bool) ClaimTable {
	t := ClaimTable{Name: c.Name, Title: c.Title, Kind: c.ClaimKind(), Source: c.Source, Sources: splitSources(c.Source), Anchor: "claim-" + slug(c.Name)}
	for _, p := range fixtures.DocumentedPairs {
		row := ClaimRow{Pair: p.String(), Anchor: t.Anchor + "--" + slug(p.String())}
		var na string
		if r, ok := c.Row(p); ok {
			row.Expected, na = r.Summary, r.NotApplicable
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
			row.Charts = append(row.Charts, s.charts...)
			row.Evidence = append(row.Evidence, s.Entries...)
			if s.Reason != "" && s.Result != ResultPass {
				row.Reasons = appendUnique(row.Reasons, s.Reason)
			}
		}
		row.Result = overall(results)
		switch {
		case na != "" && row.Result != ResultFail && row.Result != ResultPass:
			// The docs say the claim does not apply: not a shortfall of the run.
			row.Result = ResultNotApplicable
			row.Reasons = []string{"not applicable: " + na}
		case row.Result == ResultSkip && slices.Equal(row.Reasons, []string{NotSelected}):
			// Left out by the run's filters (make qualify leaves out the
			// resilience claims): not run, rather than could not run.
			row.Result = ResultNotRun
		case row.Result == ResultNotRun && cutShort:
			row.Reasons = []string{"not run: the run stopped before this claim and pair"}
		case row.Result == ResultNotRun:
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
// SKIP if any was skipped, else N/A if the docs rule every one out, else
// NOT RUN.
func overall(results []string) string {
	for _, r := range []string{ResultFail, ResultPass, ResultSkip, ResultNotApplicable} {
		if slices.Contains(results, r) {
			return r
		}
	}
	return ResultNotRun
}
