package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

// headline is the report's first line: where it ran and what it covered,
// worded so that a sim run or a partial run cannot pass for a GPU
// qualification, or, when the suite did not run, why, in plain text.
func headline(r *Report) string {
	where := targetPhrase(r.Environment)
	st := r.Statistics
	switch r.Outcome {
	case OutcomeDidNotRun:
		return fmt.Sprintf("Routing conformance %s did not run: %s", where, firstLines(cause(r.SuiteFailures), 1))
	case OutcomeInterrupted:
		return fmt.Sprintf("Routing conformance %s: interrupted after %d of %d selected specs: %s — partial report%s",
			where, st.Passed+st.Failed, st.Total-st.NotSelected, counts(st), qualifies(r))
	}
	return fmt.Sprintf("Routing conformance %s: %s%s", where, counts(st), qualifies(r))
}

// cause is the suite-level failure that explains the rest: the setup's own
// message before Ginkgo's summaries of it.
func cause(failures []string) string {
	for _, f := range failures {
		if strings.HasPrefix(f, "suite setup failed") {
			return f
		}
	}
	if len(failures) == 0 {
		return "no cause was recorded"
	}
	return failures[0]
}

func counts(st Statistics) string {
	s := fmt.Sprintf("%d passed, %d failed, %d skipped", st.Passed, st.Failed, st.Skipped)
	var of []string
	if st.NotApplicable > 0 {
		of = append(of, fmt.Sprintf("%d not applicable", st.NotApplicable))
	}
	if st.NotSelected > 0 {
		of = append(of, fmt.Sprintf("%d not selected", st.NotSelected))
	}
	if len(of) > 0 {
		s += " (" + strings.Join(of, ", ") + ")"
	}
	return s
}

// qualifies says what the run is not: never a GPU qualification on the
// simulator; on a cluster, not one when no spec needing a GPU ran.
func qualifies(r *Report) string {
	switch r.Environment.Target {
	case config.TargetKube, config.TargetKind:
		for _, s := range r.Specs {
			if slices.Contains(s.Labels, fixtures.LabelNeedsGPU) && (s.Result == ResultPass || s.Result == ResultFail) {
				return ""
			}
		}
		return " — not a GPU qualification: no spec that needs a GPU ran"
	}
	return " — not a GPU qualification"
}

// targetPhrase names the target: "on the simulator", or the cluster with
// its GPU product and operator version.
func targetPhrase(e Environment) string {
	switch e.Target {
	case config.TargetSim:
		if up := unpinnedRouters(e.RouterCode); up != "" {
			return "on the simulator with routers built from other than the pinned source (" + up + ")"
		}
		return "on the simulator"
	case "":
		return "on an unknown target"
	case config.TargetKube, config.TargetKind:
		kind := "cluster"
		if e.Target == config.TargetKind {
			kind = "kind cluster"
		}
		gpu := cmp.Or(e.GPU, "no GPU reported")
		op := "operator version unknown"
		if e.OperatorVersion != "" {
			op = "gpustack-operator " + e.OperatorVersion
		}
		return fmt.Sprintf("on %s %s (%s, %s)", kind, cmp.Or(e.Cluster, "(unnamed)"), gpu, op)
	}
	return "on target " + e.Target
}

// envBlock is the environment as the report shows it: a fixed order, each
// fact once, the cost figures last but for the notes that say something the
// rows do not.
func envBlock(r *Report) []EnvRow {
	e := r.Environment
	var rows []EnvRow
	add := func(k, v string) {
		if v = strings.TrimSpace(v); v != "" {
			rows = append(rows, EnvRow{Name: k, Value: v})
		}
	}
	switch e.Target {
	case config.TargetSim:
		add("Target", simTarget(e.RouterCode))
	case "":
		add("Target", "not known: the suite stopped before it read its config")
	default:
		add("Target", e.Target)
	}
	add("Cluster", e.Cluster)
	switch {
	case e.GPU != "":
		add("GPU", e.GPU)
	case e.Target == config.TargetSim:
		add("GPU", "none (simulated engines)")
	case e.Target != "":
		add("GPU", "none reported by the target")
	}
	add("Operator", e.OperatorVersion)
	add("Kubernetes", e.KubernetesVersion)
	add("Model", e.Model)
	add("Router image", e.RouterImage)
	for _, c := range routerCodeRows(e.RouterCode) {
		add(c.Name, c.Value)
	}
	add("Routers", strings.Join(e.Routers, ", "))
	for _, en := range e.Engines {
		v := en.Version
		if en.Image != "" {
			v += ", image " + en.Image
		}
		add("Engine "+en.Name, v)
	}
	if e.Replicas > 0 {
		add("Replicas", fmt.Sprint(e.Replicas))
	}
	if e.Requests > 0 {
		add("Requests per split", fmt.Sprint(e.Requests))
	}
	add("Config", e.ConfigFile)
	add("Label filter", e.LabelFilter)
	if e.GinkgoNodes > 0 {
		add("Ginkgo processes", fmt.Sprint(e.GinkgoNodes))
	}
	add("Random seed", fmt.Sprint(e.RandomSeed))
	if !r.StartTime.IsZero() {
		add("Started", r.StartTime.Format("2006-01-02 15:04:05 UTC"))
	}
	add("Wall time", r.WallTime)
	for _, c := range costRows(e.Cost) {
		add(c.Name, c.Value)
	}
	for _, c := range projectionRows(e.Cost) {
		add(c.Name, c.Value)
	}
	for _, c := range editRows(e.Edits) {
		add(c.Name, c.Value)
	}
	add("Notes", strings.Join(newNotes(e.Notes, rows), "\n"))
	return rows
}

// costRows are the cost figures, or why they are missing.
func costRows(c CostSummary) []EnvRow {
	rows := []EnvRow{{"ModelDeployments created", fmt.Sprint(c.ModelDeployments)}}
	if c.EnginePodsStarted == nil {
		why := fmt.Sprintf("not counted: the target counted %d of %d deployments (%s)", c.Counted, c.ModelDeployments, strings.Join(c.NotCounted, "; "))
		return append(rows, EnvRow{"Engine Pods, accelerator-seconds", why})
	}
	rows = append(rows,
		EnvRow{"Engine Pods started", fmt.Sprint(*c.EnginePodsStarted)},
		EnvRow{"Engine Pods Ready", fmt.Sprint(*c.EnginePodsReady)})
	switch {
	case c.AcceleratorSecondsNotApplicable != "":
		rows = append(rows, EnvRow{"Accelerator-seconds", c.AcceleratorSecondsNotApplicable})
	case c.AcceleratorSeconds != nil:
		rows = append(rows, EnvRow{"Accelerator-seconds", formatNumber(*c.AcceleratorSeconds) + " (engine Pods, Ready to deleted, times accelerators)"})
	}
	return rows
}

// newNotes keeps the target's notes that the rows do not already say (a
// version the Router image row names, say), sorted, each once.
func newNotes(notes []string, rows []EnvRow) []string {
	var said []string
	for _, r := range rows {
		said = append(said, strings.ToLower(r.Name+" "+r.Value))
	}
	var out []string
	for _, n := range notes {
		n = strings.TrimSpace(n)
		core := strings.ToLower(strings.TrimSpace(strings.TrimSuffix(n, "(simulated)")))
		if n == "" || slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, core) }) {
			continue
		}
		out = appendUnique(out, n)
	}
	slices.Sort(out)
	return out
}
