// Package report turns Ginkgo's report of a suite run into the
// qualification report a release manager signs off: artifacts/junit.xml,
// report.json, qualification.md and qualification.html (an environment
// block, one table per documented claim with the documented outcome beside
// the measured one for each router/engine pair, PASS/FAIL/SKIP with reasons,
// and a bar chart per measured split as inline SVG).
//
// Specs attach evidence with Record (AddReportEntry under the names and
// JSON shapes defined here), so the specs and the report agree on them.
package report

import (
	"encoding/json"
	"fmt"

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

// Counts returns the counts in replica order, formatted as "60/60".
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
