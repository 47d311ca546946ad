package routing

import (
	"context"
	"fmt"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
)

// RoundRobinSpecInput is the input of RoundRobinSpec.
type RoundRobinSpecInput struct {
	Target
	Pair fixtures.Pair
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// RoundRobinSpec: --policy round_robin set at creation. The banner reads
// policy: RoundRobin; N serial requests split N/replicas each by engine
// counts; the router's own counters rise as documented (vllm-router's
// policy decisions per worker, sglang-gateway's selections in all).
func RoundRobinSpec(input func() RoundRobinSpecInput) {
	const spec = config.SpecRoundRobin
	var (
		in  RoundRobinSpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		in.check("RoundRobinSpec", in.Pair)
		exp = expectation(fixtures.ClaimRoundRobin, in.Pair)
		in.requireRunnable(in.Pair)
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
		Expect(exp.Split.Expected(in.Requests, int(in.Config.Replicas))).NotTo(BeNil(),
			"%d requests do not divide evenly over %d replicas; set traffic.requests (or E2E_REQUESTS) to a multiple", in.Requests, in.Config.Replicas)
	})

	It("logs policy: RoundRobin, splits requests evenly and counts every pick", func(ctx SpecContext) {
		md := in.build(in.Pair, objectName(spec, in.Pair), fixtures.WithRouterArgs(exp.RouterArgs...))
		dep := in.deployReady(ctx, spec, md)

		b := waitBanner(ctx, in.Target, spec, dep)
		report.Record(report.Banner{Claim: fixtures.ClaimRoundRobin, Pair: in.Pair.String(), Expected: exp.Banner, Line: b.Summary()})
		Expect(b.Summary()).To(ContainSubstring(exp.Banner), "the router's startup banner")

		rs := in.replicas(ctx, dep)
		routerBefore := routerMetrics(ctx, dep)
		before := scrapeEngines(ctx, dep, rs)
		rep := send(ctx, in.plan(ctx, dep, in.Requests))
		s := in.measureSplit(ctx, spec, dep, in.Pair, rs, before, in.Requests)
		want := shapeWords(*exp.Split, in.Requests, len(rs))
		title := fmt.Sprintf("%d serial chats, --policy round_robin", in.Requests)
		report.Record(splitEntry(fixtures.ClaimRoundRobin, in.Pair, title, s, rs, in.Requests, rep.Summary.Failed, want))

		measured := []string{s.Ratio()}
		var problems []string
		for _, series := range exp.Series {
			got, err := seriesDelta(ctx, in.Target, spec, fixtures.ClaimRoundRobin, in.Pair.String(), dep, routerBefore, series, rs, in.Requests)
			if err != nil {
				problems = append(problems, err.Error())
			}
			measured = append(measured, got)
		}
		report.Record(report.Claim{Claim: fixtures.ClaimRoundRobin, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})
		expectShape(s, *exp.Split, in.Requests)
		Expect(problems).To(BeEmpty())
	})
}

// routerMetrics scrapes every router Pod.
func routerMetrics(ctx context.Context, dep clusters.Deployment) metrics.Snapshot {
	GinkgoHelper()
	s, err := dep.RouterMetrics(ctx)
	Expect(err).NotTo(HaveOccurred(), "scraping the router's metrics")
	return s
}

// seriesDelta waits until a router series has risen as documented over the
// traffic (per worker: requests/replicas on each replica's worker label; in
// all: requests), records the deltas of the last reading and returns them in
// words. The error says how the last reading differed.
func seriesDelta(ctx context.Context, t Target, spec, claim, pair string, dep clusters.Deployment, before metrics.Snapshot,
	s fixtures.Series, rs []clusters.Replica, requests int) (string, error) {
	GinkgoHelper()
	want := s.Expected(requests, len(rs))
	ms := labelMatchers(s.Labels)
	var got string
	var read []metrics.SeriesDelta // the last reading that gave deltas: the evidence
	check := func(ctx context.Context) error {
		after, err := dep.RouterMetrics(ctx)
		if err != nil {
			return err
		}
		ds, err := metrics.Deltas(before, after, s.Name, ms...)
		if err != nil {
			return err
		}
		read = ds
		if s.Delta == fixtures.DeltaPerWorker {
			per := metrics.SumDeltasBy(ds, s.WorkerLabel)
			var parts, bad []string
			for _, w := range workerValues(rs, s.WorkerValue) {
				parts = append(parts, fmt.Sprintf("%s=%s", w, metrics.FormatValue(per[w])))
				if per[w] != want {
					bad = append(bad, fmt.Sprintf("%s rose by %s, documented %s", w, metrics.FormatValue(per[w]), metrics.FormatValue(want)))
				}
			}
			sort.Strings(parts)
			got = fmt.Sprintf("%s +{%s}", metrics.Selector(s.Name, ms), strings.Join(parts, ", "))
			if len(bad) > 0 {
				return fmt.Errorf("%s: %s", metrics.Selector(s.Name, ms), strings.Join(bad, "; "))
			}
			return nil
		}
		total := metrics.SumDeltas(ds)
		got = fmt.Sprintf("%s +%s", metrics.Selector(s.Name, ms), metrics.FormatValue(total))
		if total != want {
			return fmt.Errorf("%s rose by %s in all, documented %s", metrics.Selector(s.Name, ms), metrics.FormatValue(total), metrics.FormatValue(want))
		}
		return nil
	}
	By("checking " + metrics.Selector(s.Name, ms) + " rose as documented")
	// Counters settle once the last response is relayed: wait for them, then
	// record the reading that was judged, whether or not it matched, and let
	// the caller fail.
	last := t.settle(ctx, spec, config.OpWaitMetrics, check)
	for _, d := range read {
		expected := want
		report.Record(report.MetricDelta{Claim: claim, Pair: pair, Metric: d.Name, Labels: d.Labels,
			Before: d.Before, After: d.After, Delta: d.Delta(), Expected: &expected})
	}
	return got, last
}

var _ = Describe("Round robin", Label(claimLabels(fixtures.ClaimRoundRobin, LabelNeedsGPU)...), func() {
	for _, p := range fixtures.DocumentedPairs {
		Describe(p.String(), Label(pairLabels(fixtures.ClaimRoundRobin, p)...), func() {
			RoundRobinSpec(func() RoundRobinSpecInput { return RoundRobinSpecInput{Target: suite, Pair: p} })
		})
	}
})
