// Package split holds how many requests each engine replica served, built
// from engine-side counter deltas (a scrape of every replica before and after
// the traffic), the evidence behind "all on one replica" or "60/60".
package split

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gpustack/routing-conformance/metrics"
)

// Engine request counters (docs/engines.md#vllm-series, docs/engines.md#sglang-series):
// one finished request adds 1. vLLM's is labelled by finished_reason and is summed over it.
const (
	VLLMRequestCounter   = "vllm:request_success_total"
	SGLangRequestCounter = "sglang:num_requests_total"
)

// RequestCounter names the finished-requests counter of an engine ("vllm" or
// "sglang", any case).
func RequestCounter(engine string) (string, error) {
	switch strings.ToLower(engine) {
	case "vllm":
		return VLLMRequestCounter, nil
	case "sglang":
		return SGLangRequestCounter, nil
	}
	return "", fmt.Errorf("split: engine %q has no known request counter; use \"vllm\" or \"sglang\"", engine)
}

// Split is a count per replica. Replicas fixes the order and lists every
// replica, so one that served nothing still shows as 0.
type Split struct {
	Counter  string         `json:"counter"` // what was counted
	Replicas []string       `json:"replicas"`
	Counts   map[string]int `json:"counts"`
}

// Row is one replica's line of a split.
type Row struct {
	Replica string `json:"replica"`
	Count   int    `json:"count"`
}

// New builds a split. Replicas named in counts but not in replicas are
// appended (sorted) so nothing counted is hidden; duplicates are dropped.
func New(counter string, replicas []string, counts map[string]int) Split {
	s := Split{Counter: counter, Counts: map[string]int{}}
	seen := map[string]bool{}
	for _, r := range replicas {
		if !seen[r] {
			seen[r] = true
			s.Replicas = append(s.Replicas, r)
		}
	}
	var extra []string
	for r, n := range counts {
		s.Counts[r] = n
		if !seen[r] {
			seen[r] = true
			extra = append(extra, r)
		}
	}
	sort.Strings(extra)
	s.Replicas = append(s.Replicas, extra...)
	for _, r := range s.Replicas {
		s.Counts[r] += 0
	}
	return s
}

// FromDeltas builds a split from counter deltas, e.g. metrics.DeltaBy of a
// router's per-worker counter. Every delta must be a whole number.
func FromDeltas(counter string, replicas []string, deltas map[string]float64) (Split, error) {
	counts := make(map[string]int, len(deltas))
	for r, d := range deltas {
		n, err := whole(d)
		if err != nil {
			return Split{}, fmt.Errorf("split of %s: replica %q: %w", counter, r, err)
		}
		counts[r] = n
	}
	return New(counter, replicas, counts), nil
}

// FromSnapshots builds a split from one scrape per replica before and after
// the traffic: each replica's count is metrics.Delta of counter (summed over
// its labels, e.g. vLLM's finished_reason) between its two snapshots. With no
// replicas given, the replicas are the keys of after, sorted. A replica
// without both snapshots, without the counter, or whose counter reset is an
// error naming it.
func FromSnapshots(counter string, replicas []string, before, after map[string]metrics.Snapshot, ms ...metrics.Matcher) (Split, error) {
	if len(replicas) == 0 {
		for r := range after {
			replicas = append(replicas, r)
		}
		sort.Strings(replicas)
	}
	if len(replicas) == 0 {
		return Split{}, fmt.Errorf("split of %s: no replicas and no snapshots", counter)
	}
	counts := make(map[string]int, len(replicas))
	for _, r := range replicas {
		b, okB := before[r]
		a, okA := after[r]
		if !okB || !okA {
			return Split{}, fmt.Errorf("split of %s: replica %q has no %s snapshot; scrape every replica both before and after the traffic", counter, r, missing(okB, okA))
		}
		d, err := metrics.Delta(b, a, counter, ms...)
		if err != nil {
			return Split{}, fmt.Errorf("split of %s: replica %q: %w", counter, r, err)
		}
		n, err := whole(d)
		if err != nil {
			return Split{}, fmt.Errorf("split of %s: replica %q: %w", counter, r, err)
		}
		counts[r] = n
	}
	return New(counter, replicas, counts), nil
}

func missing(okB, okA bool) string {
	switch {
	case !okB && !okA:
		return "before or after"
	case !okB:
		return "before"
	}
	return "after"
}

func whole(d float64) (int, error) {
	if math.IsNaN(d) || math.IsInf(d, 0) || d != math.Trunc(d) || math.Abs(d) > 1<<53 {
		return 0, fmt.Errorf("delta %v is not a whole number of requests", d)
	}
	return int(d), nil
}

// Count is one replica's count (0 for an unknown replica).
func (s Split) Count(replica string) int { return s.Counts[replica] }

// Total is the sum over replicas.
func (s Split) Total() int {
	t := 0
	for _, r := range s.Replicas {
		t += s.Counts[r]
	}
	return t
}

// Rows lists the replicas in order with their counts.
func (s Split) Rows() []Row {
	out := make([]Row, len(s.Replicas))
	for i, r := range s.Replicas {
		out[i] = Row{Replica: r, Count: s.Counts[r]}
	}
	return out
}

// Values are the counts in replica order.
func (s Split) Values() []int {
	out := make([]int, len(s.Replicas))
	for i, r := range s.Replicas {
		out[i] = s.Counts[r]
	}
	return out
}

// Served lists the replicas with a non-zero count, in order.
func (s Split) Served() []string {
	var out []string
	for _, r := range s.Replicas {
		if s.Counts[r] != 0 {
			out = append(out, r)
		}
	}
	return out
}

// Ratio is the counts joined by "/", e.g. "60/60" or "120/0".
func (s Split) Ratio() string {
	parts := make([]string, len(s.Replicas))
	for i, r := range s.Replicas {
		parts[i] = fmt.Sprint(s.Counts[r])
	}
	return strings.Join(parts, "/")
}

// String prints the split as a table with shares and bars.
func (s Split) String() string {
	total := s.Total()
	width := len("replica")
	peak := 0
	for _, r := range s.Replicas {
		width = max(width, len(r))
		peak = max(peak, s.Counts[r])
	}
	var b strings.Builder
	name := s.Counter
	if name == "" {
		name = "requests"
	}
	fmt.Fprintf(&b, "%s per replica: %s (total %d)\n", name, s.Ratio(), total)
	fmt.Fprintf(&b, "  %-*s  %6s  %6s\n", width, "replica", "count", "share")
	for _, r := range s.Replicas {
		n := s.Counts[r]
		share := "-"
		if total != 0 {
			share = fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
		}
		bar := ""
		if peak > 0 && n > 0 {
			bar = strings.Repeat("#", max(1, 20*n/peak))
		}
		fmt.Fprintf(&b, "  %-*s  %6d  %6s  %s\n", width, r, n, share, bar)
	}
	return strings.TrimRight(b.String(), "\n ")
}
