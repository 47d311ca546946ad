// Package report turns Ginkgo's report of a suite run into the
// qualification report a release manager signs off: artifacts/junit.xml,
// report.json, qualification.md and qualification.html. All four are
// rendered from one Report value, so they carry the same facts: a headline
// naming the target and the coverage, a claims × pairs matrix, every skip
// and failure with its reason, the environment block with the run's GPU
// cost, one table per claim with what the operator's docs say beside what
// this run measured, and the evidence (collapsed) with bar charts.
//
// Specs attach evidence with Record (AddReportEntry under the names and
// JSON shapes defined here), so the specs and the report agree on them. A
// new kind of evidence is a type with an EntryName, registered in
// entryTypes (registry.go); it renders without further code when it
// implements Describer (its line in the claim row and the spec list) and,
// for bars, Charter.
package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/clusters"
)

// Report entry names. Each carries the JSON value type of the same name.
const (
	EntryClaim       = "claim"        // Claim
	EntrySplit       = "split"        // Split
	EntryMetricDelta = "metric-delta" // MetricDelta
	EntryBanner      = "banner"       // Banner
	EntrySeries      = "series"       // Series
	EntryAdmission   = "admission"    // Admission
	EntryRouterExit  = "router-exit"  // RouterExit
	// EntryDeploymentCost is recorded once per created ModelDeployment, when
	// it is deleted, so the report adds up every process's deployments.
	EntryDeploymentCost = "deployment-cost" // DeploymentCost
	// EntryPickerSeed is the seed of an llm-d EPP's random tie-break, where
	// the target knows it (the sim), recorded beside a measured split.
	EntryPickerSeed = "picker-seed" // PickerSeed
)

// Entry is a piece of evidence a spec records.
type Entry interface {
	EntryName() string
}

// Record attaches e to the current spec (JSON only in reports; printed with -v
// or on failure).
func Record(e Entry) {
	// Offset(1): the entry's location is the spec line that recorded it.
	ginkgo.AddReportEntry(e.EntryName(), e, ginkgo.ReportEntryVisibilityFailureOrVerbose, ginkgo.Offset(1))
}

// Claim is a spec's verdict line: what the docs say beside what was measured.
type Claim struct {
	Claim    string `json:"claim"`
	Pair     string `json:"pair"`
	Expected string `json:"expected"`
	Measured string `json:"measured"`
}

// EntryName implements Entry.
func (Claim) EntryName() string { return EntryClaim }

func (c Claim) String() string {
	return fmt.Sprintf("%s %s: expected %s; measured %s", c.Claim, c.Pair, c.Expected, c.Measured)
}

// Describe implements Describer.
func (c Claim) Describe() string {
	return fmt.Sprintf("claim: docs say %s; this run measured %s", c.Expected, c.Measured)
}

// Split is a per-replica distribution of requests measured by engine-side
// counter deltas (one bar chart each).
type Split struct {
	Claim string `json:"claim"`
	Pair  string `json:"pair"`
	// Title says what traffic produced it, e.g. "120 serial chats, 500-char shared prefix".
	Title string `json:"title"`
	// Source names the counter, e.g. vllm:request_success_total.
	Source   string         `json:"source"`
	Requests int            `json:"requests"`
	Failures int            `json:"failures"`
	Replicas []ReplicaCount `json:"replicas"`
	// Expected is the documented shape in words ("all on one replica", "60/60").
	Expected string `json:"expected"`
}

// ReplicaCount is one replica's share.
type ReplicaCount struct {
	Replica string  `json:"replica"` // Pod name
	Address string  `json:"address"` // worker URL
	Count   float64 `json:"count"`
}

// EntryName implements Entry.
func (Split) EntryName() string { return EntrySplit }

func (s Split) String() string {
	return fmt.Sprintf("%s %s: %s by %s (%d requests, %d failed); expected %s", s.Pair, s.Title, s.Counts(), s.Source, s.Requests, s.Failures, s.Expected)
}

// Describe implements Describer.
func (s Split) Describe() string {
	return fmt.Sprintf("split %s: %s by %s (%d requests, %d failed)", s.Title, s.Counts(), s.Source, s.Requests, s.Failures)
}

// Charts implements Charter: one bar per replica, labelled with its full
// Pod name and address, scaled to the request total.
func (s Split) Charts() []Chart {
	c := Chart{
		Title:   s.Pair + ": " + s.Title,
		Caption: fmt.Sprintf("%d requests, %d failed, counted by %s; docs: %s", s.Requests, s.Failures, s.Source, s.Expected),
		Scale:   float64(s.Requests),
	}
	for _, r := range s.Replicas {
		c.Bars = append(c.Bars, Bar{Label: r.Replica, Detail: r.Address, Value: r.Count})
	}
	return []Chart{c}
}

// Counts returns the counts in replica order, formatted as "60/60".
//
// It is the measured split in the claim tables and the baseline diff.
func (s Split) Counts() string {
	out := ""
	for i, r := range s.Replicas {
		if i > 0 {
			out += "/"
		}
		out += formatNumber(r.Count)
	}
	return out
}

// MetricDelta is how one series moved over a spec's traffic.
type MetricDelta struct {
	Claim  string            `json:"claim"`
	Pair   string            `json:"pair"`
	Metric string            `json:"metric"`
	Labels map[string]string `json:"labels,omitempty"`
	Before float64           `json:"before"`
	After  float64           `json:"after"`
	Delta  float64           `json:"delta"`
	// Expected is the documented delta, if the docs give one.
	Expected *float64 `json:"expected,omitempty"`
}

// EntryName implements Entry.
func (MetricDelta) EntryName() string { return EntryMetricDelta }

func (m MetricDelta) String() string {
	s := fmt.Sprintf("%s%s: %s -> %s (+%s)", m.Metric, labelString(m.Labels), formatNumber(m.Before), formatNumber(m.After), formatNumber(m.Delta))
	if m.Expected != nil {
		s += ", documented +" + formatNumber(*m.Expected)
	}
	return s
}

// Describe implements Describer.
func (m MetricDelta) Describe() string { return "metric " + m.String() }

// SeriesKeys implements SeriesSource.
func (m MetricDelta) SeriesKeys() []string {
	return []string{seriesKey(m.Metric, slices.Sorted(maps.Keys(m.Labels)))}
}

// Banner is the router startup line a spec matched.
type Banner struct {
	Claim    string `json:"claim"`
	Pair     string `json:"pair"`
	Expected string `json:"expected"`
	// Line is the matched log line with ANSI escapes removed.
	Line string `json:"line"`
}

// EntryName implements Entry.
func (Banner) EntryName() string { return EntryBanner }

// Describe implements Describer; ANSI escapes are removed whoever recorded
// the line.
// String is what Ginkgo's log shows for the entry.
func (b Banner) String() string { return b.Describe() }

func (b Banner) Describe() string { return "banner: " + stripANSI(b.Line) }

// Series is the label values of a router series, against the replicas.
type Series struct {
	Claim  string `json:"claim"`
	Pair   string `json:"pair"`
	Metric string `json:"metric"`
	Label  string `json:"label,omitempty"`
	// Values are the label's values found, sorted.
	Values []string `json:"values,omitempty"`
	// Replicas are the values expected (the replicas' addresses), sorted.
	Replicas []string `json:"replicas,omitempty"`
	Samples  int      `json:"samples"`
}

// EntryName implements Entry.
func (Series) EntryName() string { return EntrySeries }

// Describe implements Describer. A series without a per-worker label (or one that
// was not found) says so instead of printing empty braces.
// String is what Ginkgo's log shows for the entry.
func (s Series) String() string { return s.Describe() }

func (s Series) Describe() string {
	switch {
	case s.Samples == 0 && len(s.Values) == 0:
		return fmt.Sprintf("series %s: not found in the router's scrape", s.Metric)
	case s.Label == "":
		return fmt.Sprintf("series %s: %d series (no per-worker label)", s.Metric, s.Samples)
	}
	return fmt.Sprintf("series %s{%s}: %s (replicas: %s)", s.Metric, s.Label, orNone(strings.Join(s.Values, ", ")), orNone(strings.Join(s.Replicas, ", ")))
}

// SeriesKeys implements SeriesSource.
func (s Series) SeriesKeys() []string {
	if s.Samples == 0 && len(s.Values) == 0 {
		return nil
	}
	var labels []string
	if s.Label != "" {
		labels = []string{s.Label}
	}
	return []string{seriesKey(s.Metric, labels)}
}

// Admission is one create attempt and the webhook's answer.
type Admission struct {
	Claim   string   `json:"claim"`
	Pair    string   `json:"pair"`
	Args    []string `json:"args"`
	Refused bool     `json:"refused"`
	Field   string   `json:"field,omitempty"`
	Message string   `json:"message,omitempty"`
}

// EntryName implements Entry.
func (Admission) EntryName() string { return EntryAdmission }

// Describe implements Describer.
// String is what Ginkgo's log shows for the entry.
func (a Admission) String() string { return a.Describe() }

func (a Admission) Describe() string {
	args := strings.Join(a.Args, " ")
	if !a.Refused {
		return fmt.Sprintf("admission %q admitted", args)
	}
	msg := firstLines(stripANSI(a.Message), 1)
	if a.Field != "" {
		return fmt.Sprintf("admission %q refused at %s: %s", args, a.Field, msg)
	}
	return fmt.Sprintf("admission %q refused: %s", args, msg)
}

// RouterExit is how a router stopped at startup.
type RouterExit struct {
	Claim    string `json:"claim"`
	Pair     string `json:"pair"`
	Value    string `json:"value"` // the --policy value
	ExitCode *int32 `json:"exitCode,omitempty"`
	Restarts int32  `json:"restarts"`
	Ready    bool   `json:"ready"`
	// RouterReady is the condition as status reason, e.g. False/NoReadyReplicas.
	RouterReady string `json:"routerReady"`
	// Stderr is the previous container's clap text.
	Stderr string `json:"stderr"`
}

// EntryName implements Entry.
func (RouterExit) EntryName() string { return EntryRouterExit }

// Describe implements Describer.
// String is what Ginkgo's log shows for the entry.
func (x RouterExit) String() string { return x.Describe() }

func (x RouterExit) Describe() string {
	code := "none"
	if x.ExitCode != nil {
		code = fmt.Sprint(*x.ExitCode)
	}
	return fmt.Sprintf("router with --policy %s: exit %s, restarts %d, ready %v, RouterReady %s", x.Value, code, x.Restarts, x.Ready, x.RouterReady)
}

// DeploymentCost is one ModelDeployment the suite created and what it held
// of the target, read when it was deleted (or when its last spec ended, if
// cleanup is skipped). Cost is nil when the target did not count it; Error
// then says why, and the report says the figures are not counted rather
// than showing zeros.
type DeploymentCost struct {
	Name       string         `json:"name"`
	Namespace  string         `json:"namespace,omitempty"`
	Pair       string         `json:"pair"`
	RouterArgs []string       `json:"routerArgs,omitempty"`
	Deleted    bool           `json:"deleted"`
	Cost       *clusters.Cost `json:"cost,omitempty"`
	Error      string         `json:"error,omitempty"`
}

// EntryName implements Entry.
func (DeploymentCost) EntryName() string { return EntryDeploymentCost }

// String is what Ginkgo's log shows for the entry: the figures, not the
// pointer that holds them.
func (x DeploymentCost) String() string { return x.Describe() }

// Describe implements Describer.
func (x DeploymentCost) Describe() string {
	if x.Cost == nil {
		return fmt.Sprintf("deployment %s: cost not counted: %s", x.Name, x.Error)
	}
	return fmt.Sprintf("deployment %s: %d engine Pods started, %d Ready, %s accelerator-seconds", x.Name,
		x.Cost.EnginePodsStarted, x.Cost.EnginePodsReady, formatNumber(x.Cost.AcceleratorSeconds))
}

// PickerSeed is the seed an llm-d router Pod's EPP gave its max-score
// picker's random tie-break: with it the sim reproduces a split exactly.
type PickerSeed struct {
	Claim string `json:"claim"`
	Pair  string `json:"pair"`
	Pod   string `json:"pod"`
	Seed  uint64 `json:"seed"`
}

// EntryName implements Entry.
func (PickerSeed) EntryName() string { return EntryPickerSeed }

// Describe implements Describer.
func (p PickerSeed) Describe() string { return p.String() }

func (p PickerSeed) String() string {
	return fmt.Sprintf("router Pod %s: EPP tie-break seed %d", p.Pod, p.Seed)
}

// decodeEntry reads a report entry's value into out. Entries recorded on this
// process still hold the raw value; entries from other processes arrive as JSON.
func decodeEntry(e types.ReportEntry, out any) error {
	data := []byte(e.Value.AsJSON)
	if raw := e.Value.GetRawValue(); raw != nil && e.Value.AsJSON == "" {
		var err error
		if data, err = json.Marshal(raw); err != nil {
			return err
		}
	}
	if len(data) == 0 {
		return fmt.Errorf("report entry %q has no value", e.Name)
	}
	return json.Unmarshal(data, out)
}

func formatNumber(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.2f", f)
}
