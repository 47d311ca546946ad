package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
)

// RouterMetrics scrapes every router Pod.
func RouterMetrics(ctx context.Context, dep clusters.Deployment) metrics.Snapshot {
	GinkgoHelper()
	s, err := dep.RouterMetrics(ctx)
	Expect(err).NotTo(HaveOccurred(), "scraping the router's metrics")
	return s
}

// Reading is the last scrape a Settle judged, with the matcher that judged
// it: asserted with Expect after the evidence is recorded, so a failure
// message shows the matcher's evidence and the report has every reading.
type Reading struct {
	What    string
	After   metrics.Snapshot
	Err     error // the scrape's, when none succeeded
	Matcher types.GomegaMatcher
}

// Expect asserts the reading.
func (r Reading) Expect() {
	GinkgoHelper()
	Expect(r.Err).NotTo(HaveOccurred(), "scraping %s", r.What)
	Expect(r.After).To(r.Matcher, r.What)
}

// SettleRouter waits, within <claim>/wait-metrics, until the router's
// metrics match m, and returns the last reading to assert after recording.
func (in Spec) SettleRouter(ctx context.Context, dep clusters.Deployment, what string, m types.GomegaMatcher) Reading {
	GinkgoHelper()
	r := Reading{What: what, Matcher: m}
	r.After, r.Err = Settle(ctx, in, config.OpWaitMetrics, dep.RouterMetrics, m)
	return r
}

// WorkerValues are the label values a series should carry, one per replica.
func WorkerValues(rs []clusters.Replica, form string) []string {
	var out []string
	for _, r := range rs {
		switch form {
		case fixtures.WorkerPodRank:
			out = append(out, r.Name+"-rank-0")
		default:
			out = append(out, r.URL())
		}
	}
	sort.Strings(out)
	return out
}

// LabelMatchers turns a series' fixed labels into matchers.
func LabelMatchers(labels map[string]string) []metrics.Matcher {
	var ms []metrics.Matcher
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		ms = append(ms, metrics.Eq(k, labels[k]))
	}
	return ms
}

// SeriesDelta waits until a router series has risen as documented over
// the traffic (per worker: requests/replicas on each replica's worker
// label; in all: requests), records the deltas of the last reading and
// returns them in words with the reading, for the caller to assert after
// recording the rest.
func (in Spec) SeriesDelta(ctx context.Context, dep clusters.Deployment, before metrics.Snapshot,
	s fixtures.Series, rs []clusters.Replica, requests int) (string, Reading) {
	GinkgoHelper()
	want := s.Expected(requests, len(rs))
	ms := LabelMatchers(s.Labels)
	sel := metrics.Selector(s.Name, ms)
	workers := WorkerValues(rs, s.WorkerValue)
	m := assertions.HaveCounterRisenBy(before, s.Name, want, ms...)
	if s.Delta == fixtures.DeltaPerWorker {
		m = assertions.HaveCounterRisenByPer(before, s.Name, s.WorkerLabel, workers, want, ms...)
	}
	By("checking " + sel + " rose as documented")
	// Counters settle once the last response is relayed: wait for them, then
	// record the reading that was judged, whether or not it matched.
	r := in.SettleRouter(ctx, dep, fmt.Sprintf("the router's %s over %d requests", s.Name, requests), m)
	if r.Err != nil {
		return fmt.Sprintf("%s: %v", sel, r.Err), r
	}
	ds, err := metrics.Deltas(before, r.After, s.Name, ms...)
	if err != nil {
		return fmt.Sprintf("%s: %v", sel, err), r
	}
	for _, d := range ds {
		expected := want
		report.Record(report.MetricDelta{Claim: in.Claim, Pair: in.Pair.String(), Metric: d.Name, Labels: d.Labels,
			Before: d.Before, After: d.After, Delta: d.Delta(), Expected: &expected})
	}
	if s.Delta == fixtures.DeltaPerWorker {
		per := metrics.SumDeltasBy(ds, s.WorkerLabel)
		var parts []string
		for _, w := range workers {
			parts = append(parts, fmt.Sprintf("%s=%s", w, metrics.FormatValue(per[w])))
		}
		return fmt.Sprintf("%s +{%s}", sel, strings.Join(parts, ", ")), r
	}
	return fmt.Sprintf("%s +%s", sel, metrics.FormatValue(metrics.SumDeltas(ds))), r
}

// SeriesPresent waits until a router series exists (naming exactly rs on
// its worker label, when it has one), records what it found and returns it
// in words with the reading, for the caller to assert after recording.
// read is the scrape each poll judges (nil: the router's metrics).
func (in Spec) SeriesPresent(ctx context.Context, dep clusters.Deployment, s fixtures.Series, rs []clusters.Replica,
	read func(context.Context) (metrics.Snapshot, error)) (string, Reading) {
	GinkgoHelper()
	if read == nil {
		read = dep.RouterMetrics
	}
	ms := LabelMatchers(s.Labels)
	r := Reading{What: fmt.Sprintf("the router's %s after traffic", metrics.Selector(s.Name, ms)), Matcher: assertions.HaveSeries(s.Name, ms...)}
	if s.WorkerLabel != "" {
		r.Matcher = assertions.HaveLabelValues(s.Name, s.WorkerLabel, WorkerValues(rs, s.WorkerValue), ms...)
	}
	r.After, r.Err = Settle(ctx, in, config.OpWaitMetrics, read, r.Matcher)
	found := in.seriesEntry(r.After, s, rs)
	report.Record(found)
	if s.WorkerLabel != "" {
		return fmt.Sprintf("%s{%s}: %s", s.Name, s.WorkerLabel, strings.Join(found.Values, ", ")), r
	}
	return fmt.Sprintf("%s: %d series", s.Name, found.Samples), r
}

// seriesEntry is the report's view of one documented series in a router
// scrape: how many samples, and, for a per-worker series, its worker label
// values beside the replicas'.
func (in Spec) seriesEntry(snap metrics.Snapshot, s fixtures.Series, rs []clusters.Replica) report.Series {
	out := report.Series{Claim: in.Claim, Pair: in.Pair.String(), Metric: s.Name, Label: s.WorkerLabel}
	samples, err := snap.Select(s.Name, LabelMatchers(s.Labels)...)
	if err != nil || len(samples) == 0 {
		return out
	}
	out.Samples = len(samples)
	if s.WorkerLabel == "" {
		return out
	}
	for _, sm := range samples {
		out.Values = append(out.Values, sm.Labels[s.WorkerLabel])
	}
	out.Values = slices.Compact(slices.Sorted(slices.Values(out.Values)))
	out.Replicas = WorkerValues(rs, s.WorkerValue)
	return out
}
