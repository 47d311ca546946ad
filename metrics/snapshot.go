// Package metrics scrapes and parses the Prometheus text exposition format
// (with prometheus/common's expfmt) into a Snapshot, and computes deltas
// between two snapshots by metric name and label matchers.
//
// It shares nothing on purpose with the sim engines' exposition writer
// (sim/engine/internal/promtext): this parser is the oracle for
// what a real scraper reads, that writer the emulation of what vLLM and
// SGLang print, so one cannot hide the other's mistake.
package metrics

import "time"

// Sample is one series value. Histograms and summaries are flattened the way
// they appear on the wire: <name>_bucket{le=...}, <name>_sum, <name>_count.
type Sample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// Family is the HELP/TYPE metadata of one metric family, keyed by family name.
type Family struct {
	Name string `json:"name"`
	Help string `json:"help,omitempty"`
	Type string `json:"type"` // counter, gauge, histogram, summary, untyped
}

// Snapshot is one or more scrapes taken at about the same time. Several
// sources (e.g. every router Pod) may be merged into one snapshot: every
// sample then carries the label SourceLabel naming where it came from, and
// sums over matchers add the sources together.
type Snapshot struct {
	Time     time.Time         `json:"time"`
	Sources  []string          `json:"sources,omitempty"`
	Families map[string]Family `json:"families,omitempty"`
	Samples  []Sample          `json:"samples"`
}

// SourceLabel is added to every sample of a merged snapshot.
const SourceLabel = "__source__"
