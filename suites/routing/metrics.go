package routing

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
)

// PerWorkerMetricsSpecInput is the input of PerWorkerMetricsSpec.
type PerWorkerMetricsSpecInput struct {
	Target
	Pair fixtures.Pair
}

// PerWorkerMetricsSpec: after traffic, each router's documented per-worker
// series exist and their worker labels name exactly the replicas' addresses
// (http://<podIP>:<port>; llm-d: <pod>-rank-0). Series that only move under
// load (sglang-gateway's in-flight gauge) get concurrent traffic, sent again
// on every poll until each replica has carried some.
func PerWorkerMetricsSpec(input func() PerWorkerMetricsSpecInput) {
	const spec = config.SpecMetrics
	var (
		in  PerWorkerMetricsSpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		in.check("PerWorkerMetricsSpec", in.Pair)
		exp = expectation(fixtures.ClaimMetrics, in.Pair)
		in.requireRunnable(in.Pair)
	})

	It("exports the documented per-worker series naming every replica", func(ctx SpecContext) {
		md := in.build(in.Pair, objectName(spec, in.Pair), fixtures.WithRouterArgs(exp.RouterArgs...))
		dep := in.deployReady(ctx, spec, md)
		rs := in.replicas(ctx, dep)

		plan := in.plan(ctx, dep, 4*len(rs))
		if exp.Concurrent {
			level := slices.Max(in.Config.Traffic.Concurrency)
			plan.Requests, plan.Concurrency = 4*level, level
			plan.Prompts = traffic.PromptSet{Kind: traffic.PromptsUnrelated, PrefixChars: in.Config.Traffic.PrefixChars}
		} else {
			send(ctx, plan)
		}

		var measured []string
		var problems []string
		for _, s := range exp.Series {
			var found report.Series
			err := in.settle(ctx, spec, config.OpWaitMetrics, func(ctx context.Context) error {
				if exp.Concurrent {
					// The gauge is set only while a request is in flight on a worker.
					if _, err := traffic.Run(ctx, plan); err != nil {
						return err
					}
				}
				snap, err := dep.RouterMetrics(ctx)
				if err != nil {
					return err
				}
				found, err = seriesLabels(snap, s, rs, in.Pair)
				return err
			})
			report.Record(found)
			if err != nil {
				problems = append(problems, err.Error())
			}
			if s.WorkerLabel != "" {
				measured = append(measured, fmt.Sprintf("%s{%s}: %s", s.Name, s.WorkerLabel, strings.Join(found.Values, ", ")))
			} else {
				measured = append(measured, fmt.Sprintf("%s: %d series", s.Name, found.Samples))
			}
		}
		report.Record(report.Claim{Claim: fixtures.ClaimMetrics, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})
		Expect(problems).To(BeEmpty())
	})
}

// seriesLabels checks one documented series in a router scrape: it exists
// and, when it is per worker, its worker label values are exactly the
// replicas'.
func seriesLabels(snap metrics.Snapshot, s fixtures.Series, rs []clusters.Replica, p fixtures.Pair) (report.Series, error) {
	ms := labelMatchers(s.Labels)
	out := report.Series{Claim: fixtures.ClaimMetrics, Pair: p.String(), Metric: s.Name, Label: s.WorkerLabel}
	samples, err := snap.Select(s.Name, ms...)
	if err != nil {
		return out, err
	}
	out.Samples = len(samples)
	if len(samples) == 0 {
		return out, snap.NoSeries(s.Name, ms...) // with what is there instead
	}
	if s.WorkerLabel == "" {
		return out, nil
	}
	seen := map[string]bool{}
	for _, sm := range samples {
		seen[sm.Labels[s.WorkerLabel]] = true
	}
	for v := range seen {
		out.Values = append(out.Values, v)
	}
	sort.Strings(out.Values)
	out.Replicas = workerValues(rs, s.WorkerValue)
	if !slices.Equal(out.Values, out.Replicas) {
		return out, fmt.Errorf("%s label %s has values %q; the replicas are %q", metrics.Selector(s.Name, ms), s.WorkerLabel, out.Values, out.Replicas)
	}
	return out, nil
}

var _ = Describe("Per-worker metrics", Label(claimLabels(fixtures.ClaimMetrics, LabelNeedsGPU)...), func() {
	for _, p := range fixtures.DocumentedPairs {
		Describe(p.String(), Label(pairLabels(fixtures.ClaimMetrics, p)...), func() {
			PerWorkerMetricsSpec(func() PerWorkerMetricsSpecInput { return PerWorkerMetricsSpecInput{Target: suite, Pair: p} })
		})
	}
})
