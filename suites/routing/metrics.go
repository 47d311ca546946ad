package routing

import (
	"context"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimMetrics: the routers' per-worker series name the replicas.
const ClaimMetrics = "metrics"

var _ = register(Claim{
	Name:        ClaimMetrics,
	Title:       "Per-worker metrics",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		return need(nil, len(e.Series) > 0, "metrics needs series")
	},
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		PerWorkerMetricsSpec(func() PerWorkerMetricsSpecInput { return PerWorkerMetricsSpecInput{Input: input()} })
	},
})

// PerWorkerMetricsSpecInput is the input of PerWorkerMetricsSpec.
type PerWorkerMetricsSpecInput struct {
	Input
}

// PerWorkerMetricsSpec: after traffic, each router's documented per-worker
// series exist and their worker labels name exactly the replicas' addresses
// (http://<podIP>:<port>; llm-d: <pod>-rank-0). Series that only move under
// load (sglang-gateway's in-flight gauge) get concurrent traffic, sent again
// on every poll until each replica has carried some.
func PerWorkerMetricsSpec(input func() PerWorkerMetricsSpecInput) {
	var (
		in  PerWorkerMetricsSpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("PerWorkerMetricsSpec", ClaimMetrics)
	})

	It("exports the documented per-worker series naming every replica", func(ctx SpecContext) {
		dep := in.ready(ctx, ClaimMetrics, exp.RouterArgs)
		rs := in.replicas(ctx, dep)

		plan := in.plan(ctx, dep, 4*len(rs))
		if exp.Concurrent {
			level := slices.Max(in.Config.Traffic.Concurrency)
			plan.Requests, plan.Concurrency = 4*level, level
			plan.Prompts = traffic.PromptSet{Kind: traffic.PromptsUnrelated, PrefixChars: in.Config.Traffic.PrefixChars}
		} else {
			in.send(ctx, ClaimMetrics, plan)
		}

		var measured []string
		var readings []reading
		for _, s := range exp.Series {
			ms := labelMatchers(s.Labels)
			r := reading{what: fmt.Sprintf("the router's %s after traffic", metrics.Selector(s.Name, ms)), matcher: assertions.HaveSeries(s.Name, ms...)}
			if s.WorkerLabel != "" {
				r.matcher = assertions.HaveLabelValues(s.Name, s.WorkerLabel, workerValues(rs, s.WorkerValue), ms...)
			}
			r.after, r.err = settle(ctx, in.Target, ClaimMetrics, config.OpWaitMetrics, func(ctx context.Context) (metrics.Snapshot, error) {
				if exp.Concurrent {
					// The gauge is set only while a request is in flight on a worker.
					if _, err := traffic.Run(ctx, plan); err != nil {
						return metrics.Snapshot{}, err
					}
				}
				return dep.RouterMetrics(ctx)
			}, r.matcher)
			found := seriesEntry(r.after, s, rs, in.Pair)
			report.Record(found)
			readings = append(readings, r)
			if s.WorkerLabel != "" {
				measured = append(measured, fmt.Sprintf("%s{%s}: %s", s.Name, s.WorkerLabel, strings.Join(found.Values, ", ")))
			} else {
				measured = append(measured, fmt.Sprintf("%s: %d series", s.Name, found.Samples))
			}
		}
		report.Record(report.Claim{Claim: ClaimMetrics, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})
		for _, r := range readings {
			r.expect()
		}
	})
}

// seriesEntry is the report's view of one documented series in a router
// scrape: how many samples, and, for a per-worker series, its worker label
// values beside the replicas'.
func seriesEntry(snap metrics.Snapshot, s fixtures.Series, rs []clusters.Replica, p api.Pair) report.Series {
	out := report.Series{Claim: ClaimMetrics, Pair: p.String(), Metric: s.Name, Label: s.WorkerLabel}
	samples, err := snap.Select(s.Name, labelMatchers(s.Labels)...)
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
	out.Replicas = workerValues(rs, s.WorkerValue)
	return out
}
