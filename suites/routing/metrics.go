package routing

import (
	"context"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/suites/framework"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimMetrics: the routers' per-worker series exist after traffic and
// name exactly the replicas, as the operator's routing page lists them.
const ClaimMetrics = "metrics"

// MetricsRow is what metrics' rows state.
type MetricsRow struct {
	// Concurrent asks for concurrent traffic: a series that only moves
	// under load (sglang-gateway's in-flight gauge).
	Concurrent bool `json:"concurrent,omitempty"`
	// Series must exist, naming the replicas on their worker label.
	Series []fixtures.Series `json:"series"`
}

var _ = framework.Add(Registry, framework.Claim[MetricsRow]{
	Name:  ClaimMetrics,
	Title: "Per-worker metrics",
	Asserts: "each router's documented per-worker series exist after traffic, and their `worker` labels name exactly " +
		"the replicas' addresses",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Specs:       PerWorkerMetricsSpec,
})

// PerWorkerMetricsSpec: after traffic, each router's documented per-worker
// series exist and their worker labels name exactly the replicas' addresses
// (http://<podIP>:<port>; llm-d: <pod>-rank-0). Series that only move under
// load (sglang-gateway's in-flight gauge) get concurrent traffic, sent again
// on every poll until each replica has carried some.
func PerWorkerMetricsSpec(input func() framework.Input[MetricsRow]) {
	framework.CheckInput("PerWorkerMetricsSpec", input)
	var in framework.Input[MetricsRow]
	BeforeEach(func() {
		in = input()
		in.Begin()
	})

	It("exports the documented per-worker series naming every replica", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		rs := in.Replicas(ctx, dep)

		plan := in.ChatPlan(ctx, dep, 4*len(rs))
		read := dep.RouterMetrics
		if in.Expect.Concurrent {
			level := slices.Max(in.Config.Traffic.Concurrency)
			plan.Requests, plan.Concurrency = 4*level, level
			plan.Prompts = traffic.PromptSet{Kind: traffic.PromptsUnrelated, PrefixChars: in.Config.Traffic.PrefixChars}
			read = func(ctx context.Context) (metrics.Snapshot, error) {
				// The gauge is set only while a request is in flight on a worker.
				if _, err := traffic.Run(ctx, plan); err != nil {
					return metrics.Snapshot{}, err
				}
				return dep.RouterMetrics(ctx)
			}
		} else {
			in.Send(ctx, plan)
		}

		var measured []string
		var readings []framework.Reading
		for _, s := range in.Expect.Series {
			words, r := in.SeriesPresent(ctx, dep, s, rs, read)
			measured = append(measured, words)
			readings = append(readings, r)
		}
		in.Record(in.Row.Summary, strings.Join(measured, "; "))
		for _, r := range readings {
			r.Expect()
		}
	})
}
