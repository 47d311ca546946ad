package framework

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
)

// ScrapeEngines takes one engine scrape per replica, keyed by replica name.
func ScrapeEngines(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica) map[string]metrics.Snapshot {
	GinkgoHelper()
	out, err := EngineSnapshots(ctx, dep, rs)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// EngineSnapshots is ScrapeEngines for a poll, returning the first error.
func EngineSnapshots(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica) (map[string]metrics.Snapshot, error) {
	out := map[string]metrics.Snapshot{}
	for _, r := range rs {
		s, err := dep.EngineMetrics(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("scraping engine %s: %w", r.Name, err)
		}
		out[r.Name] = s
	}
	return out, nil
}

// ReplicaNames are the replicas' names, in order.
func ReplicaNames(rs []clusters.Replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// MeasureSplit scrapes the engines until their request counters account
// for every request sent (counters move when a request finishes), then
// returns the per-replica split: the deltas over this spec's traffic only.
func (in Spec) MeasureSplit(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, before map[string]metrics.Snapshot, sent int) split.Split {
	GinkgoHelper()
	return in.SplitOnce(ctx, dep, rs, before, assertions.HaveTotal(sent), "account for every request sent")
}

// SplitOnce scrapes the engines, within <claim>/wait-metrics, until the
// split of their request counters since before matches m (what it means
// in words: why), and returns it.
func (in Spec) SplitOnce(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica,
	before map[string]metrics.Snapshot, m types.GomegaMatcher, why string) split.Split {
	GinkgoHelper()
	counter, err := split.RequestCounter(in.Pair.Engine)
	Expect(err).NotTo(HaveOccurred())
	var s split.Split
	in.Eventually(ctx, config.OpWaitMetrics, func(g Gomega, ctx context.Context) {
		after, err := EngineSnapshots(ctx, dep, rs)
		g.Expect(err).NotTo(HaveOccurred())
		s, err = split.FromSnapshots(counter, ReplicaNames(rs), before, after)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s).To(m, "engine counters %s %s", counter, why)
	}).Should(Succeed())
	return s
}

// RecordSplit records a split with what was expected of it.
func (in Spec) RecordSplit(title string, s split.Split, rs []clusters.Replica, sent, failed int, expected string) {
	e := report.Split{Claim: in.Claim, Pair: in.Pair.String(), Title: title, Source: s.Counter, Requests: sent, Failures: failed, Expected: expected}
	for _, r := range rs {
		e.Replicas = append(e.Replicas, report.ReplicaCount{Replica: r.Name, Address: r.URL(), Count: float64(s.Count(r.Name))})
	}
	report.Record(e)
}

// ExpectShape asserts a split of sent requests against its documented or
// derived shape (assertions.HaveShape); a recorded shape asserts only that
// the split accounts for every request.
func ExpectShape(s split.Split, shape fixtures.Split, sent int) {
	GinkgoHelper()
	Expect(s).To(assertions.HaveShape(shape, sent))
}

// ShapeWords describes a documented or derived shape for the report.
func ShapeWords(shape fixtures.Split, sent, replicas int) string {
	switch shape.Shape {
	case fixtures.ShapeOneReplica:
		return fmt.Sprintf("all %d on one replica (documented %s)", sent, shape.Documented)
	case fixtures.ShapeEven:
		parts := make([]string, replicas)
		for i := range parts {
			parts[i] = fmt.Sprint(sent / max(replicas, 1))
		}
		return fmt.Sprintf("%s of %d (documented %s)", strings.Join(parts, "/"), sent, shape.Documented)
	case fixtures.ShapeBinomial:
		lo, hi, _ := shape.Bounds(sent, replicas)
		return fmt.Sprintf("each replica within [%d, %d] of %d (Bin(%d, 1/%d), %v two-sided)", lo, hi, sent, sent, replicas, shape.Confidence)
	case fixtures.ShapeSpread:
		return "every replica used"
	}
	return fmt.Sprintf("recorded, not asserted (documented %s)", shape.Documented)
}
