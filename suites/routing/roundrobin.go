package routing

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
)

// ClaimRoundRobin: --policy round_robin set at creation.
const ClaimRoundRobin = "roundrobin"

var _ = register(Claim{
	Name:        ClaimRoundRobin,
	Title:       "Round robin",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		out := need(nil, e.Banner != "" && e.Split != nil && len(e.Series) > 0, "roundrobin needs banner, split and series")
		return requireBanner(out, e.Banner)
	},
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		RoundRobinSpec(func() RoundRobinSpecInput { return RoundRobinSpecInput{Input: input()} })
	},
})

// RoundRobinSpecInput is the input of RoundRobinSpec.
type RoundRobinSpecInput struct {
	Input
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// RoundRobinSpec: --policy round_robin set at creation. The banner reads
// policy: RoundRobin; N serial requests split N/replicas each by engine
// counts; the router's own counters rise as documented (vllm-router's
// policy decisions per worker, sglang-gateway's selections in all).
func RoundRobinSpec(input func() RoundRobinSpecInput) {
	var (
		in  RoundRobinSpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("RoundRobinSpec", ClaimRoundRobin)
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
		Expect(exp.Split.Expected(in.Requests, int(in.Config.Replicas))).NotTo(BeNil(),
			"%d requests do not divide evenly over %d replicas; set traffic.requests (or E2E_REQUESTS) to a multiple", in.Requests, in.Config.Replicas)
	})

	It("logs policy: RoundRobin, splits requests evenly and counts every pick", func(ctx SpecContext) {
		dep := in.ready(ctx, ClaimRoundRobin, exp.RouterArgs)

		b := in.waitBanner(ctx, ClaimRoundRobin, dep)
		report.Record(report.Banner{Claim: ClaimRoundRobin, Pair: in.Pair.String(), Expected: exp.Banner, Line: b.Summary()})
		expectBanner(b, exp.Banner)

		rs := in.replicas(ctx, dep)
		routerBefore := routerMetrics(ctx, dep)
		before := scrapeEngines(ctx, dep, rs)
		rep := in.send(ctx, ClaimRoundRobin, in.plan(ctx, dep, in.Requests))
		s := in.measureSplit(ctx, ClaimRoundRobin, dep, in.Pair, rs, before, in.Requests)
		want := shapeWords(*exp.Split, in.Requests, len(rs))
		title := fmt.Sprintf("%d serial chats, --policy round_robin", in.Requests)
		report.Record(splitEntry(ClaimRoundRobin, in.Pair, title, s, rs, in.Requests, rep.Summary.Failed, want))

		measured := []string{s.Ratio()}
		var rises []reading
		for _, series := range exp.Series {
			words, r := in.seriesDelta(ctx, ClaimRoundRobin, dep, routerBefore, series, rs, in.Requests)
			measured = append(measured, words)
			rises = append(rises, r)
		}
		report.Record(report.Claim{Claim: ClaimRoundRobin, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})
		expectShape(s, *exp.Split, in.Requests)
		for _, r := range rises {
			r.expect()
		}
	})
}

// seriesDelta waits until a router series has risen as documented over the
// traffic (per worker: requests/replicas on each replica's worker label; in
// all: requests), records the deltas of the last reading and returns them
// in words with the reading, for the caller to assert after recording the
// rest.
func (in Input) seriesDelta(ctx context.Context, claim string, dep clusters.Deployment, before metrics.Snapshot,
	s fixtures.Series, rs []clusters.Replica, requests int) (string, reading) {
	GinkgoHelper()
	want := s.Expected(requests, len(rs))
	ms := labelMatchers(s.Labels)
	sel := metrics.Selector(s.Name, ms)
	workers := workerValues(rs, s.WorkerValue)
	r := reading{what: fmt.Sprintf("the router's %s over %d requests", s.Name, requests),
		matcher: assertions.HaveCounterRisenBy(before, s.Name, want, ms...)}
	if s.Delta == fixtures.DeltaPerWorker {
		r.matcher = assertions.HaveCounterRisenByPer(before, s.Name, s.WorkerLabel, workers, want, ms...)
	}
	By("checking " + sel + " rose as documented")
	// Counters settle once the last response is relayed: wait for them, then
	// record the reading that was judged, whether or not it matched.
	r.after, r.err = settle(ctx, in.Target, claim, config.OpWaitMetrics, dep.RouterMetrics, r.matcher)
	if r.err != nil {
		return fmt.Sprintf("%s: %v", sel, r.err), r
	}
	ds, err := metrics.Deltas(before, r.after, s.Name, ms...)
	if err != nil {
		return fmt.Sprintf("%s: %v", sel, err), r
	}
	for _, d := range ds {
		expected := want
		report.Record(report.MetricDelta{Claim: claim, Pair: in.Pair.String(), Metric: d.Name, Labels: d.Labels,
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
