package routing

import (
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimConcurrency: the affinity traffic at each configured concurrency
// keeps the shape the routers' algorithms imply: vllm-router spreads chats
// by least load, sglang-gateway keeps a shared prefix on one replica.
const ClaimConcurrency = "concurrency"

// ConcurrencyRow is what concurrency's rows state.
type ConcurrencyRow struct {
	Concurrency Concurrency `json:"concurrency"`
}

// Concurrency is what concurrent traffic at each configured level
// (traffic.concurrency) does to the split.
type Concurrency struct {
	// Shape is the split at every level: spread, one-replica or recorded.
	Shape string `json:"shape"`
	// UpTo is the highest level the shape is derived for (0: all); the
	// split of a higher level is recorded only.
	UpTo int `json:"upTo,omitempty"`
}

// Check implements yamlbind.Checker.
func (c Concurrency) Check() []string {
	var out []string
	if !slices.Contains([]string{fixtures.ShapeSpread, fixtures.ShapeOneReplica, fixtures.ShapeRecorded}, c.Shape) {
		out = append(out, fmt.Sprintf("shape %q is not one of spread, one-replica, recorded", c.Shape))
	}
	if c.UpTo < 0 {
		out = append(out, "upTo must be >= 0")
	}
	return out
}

var _ = framework.Add(Registry, framework.Claim[ConcurrencyRow]{
	Name:  ClaimConcurrency,
	Title: "Concurrent spread",
	Asserts: "the affinity chats at each `traffic.concurrency` level (after one warm-up request): no failures; vllm-router " +
		"uses both replicas at every level (chat routes on \"\", least in flight), sglang-gateway keeps each level on one " +
		"replica (prefix match; the imbalance rule needs more than 64 in flight); llm-d recorded; split, errors, latency " +
		"and TTFT p50/p95/p99 per level in a sweep chart",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	// The default deployment: each level's prompts start with a fresh
	// nonce and its split is a delta over its own requests.
	Specs: func(input func() framework.Input[ConcurrencyRow]) {
		ConcurrencySpec(func() ConcurrencySpecInput { return ConcurrencySpecInput{Input: input()} })
	},
})

// ConcurrencySpecInput is the input of ConcurrencySpec.
type ConcurrencySpecInput struct {
	framework.Input[ConcurrencyRow]
	// Levels overrides traffic.concurrency when set.
	Levels []int
	// Requests overrides traffic.requests (per level) when > 0.
	Requests int
}

// Check implements framework.SpecInput.
func (in ConcurrencySpecInput) Check() error {
	if err := checkRequests(in.Spec, in.Requests); err != nil {
		return err
	}
	for i, c := range in.Levels {
		if c < 1 {
			return fmt.Errorf("input.Levels[%d] must be at least 1 (got %d)", i, c)
		}
	}
	return nil
}

// ConcurrencySpec: the affinity traffic (chats sharing the configured
// prefix, streaming and not in turn) at each concurrency level, after one
// warm-up request of the level's prompts sent alone (so that no concurrent
// first request can race the first insert of the prefix). Per level: no
// request fails, and the split by engine counter deltas has the derived
// shape (levels above concurrency.upTo are recorded only); split, errors
// and latency and TTFT percentiles are recorded as one sweep. Latencies are
// evidence, never asserted (performance claims are benchmarks).
func ConcurrencySpec(input func() ConcurrencySpecInput) {
	framework.CheckInput("ConcurrencySpec", input)
	var in ConcurrencySpecInput
	BeforeEach(func() {
		in = input()
		in.Begin()
		if in.Levels == nil {
			in.Levels = in.Config.Traffic.Concurrency
		}
		in.Requests = in.RequestsOr(in.Requests)
	})

	It("routes concurrent prefix-sharing chats as the algorithm implies at every level, with no failures", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		rs := in.Replicas(ctx, dep)
		shape := in.Expect.Concurrency
		sweep := report.Sweep{Claim: in.Claim, Pair: in.Pair.String(), Expected: concurrencyWords(shape),
			Title: fmt.Sprintf("1 warm-up + %d chats per level, %d-character shared prefix, streaming and not in turn", in.Requests, in.Config.Traffic.PrefixChars)}
		type level struct {
			c      int
			s      split.Split
			failed int
		}
		var levels []level
		for _, c := range in.Levels {
			before := framework.ScrapeEngines(ctx, dep, rs)
			plan := in.ChatPlan(ctx, dep, 1)
			warm := in.Send(ctx, plan)
			// The same prefix: the level continues the warm-up's prompts.
			plan.Prompts.Nonce = warm.Plan.Prompts.Nonce
			plan.Requests, plan.Concurrency, plan.FirstIndex = in.Requests, c, 1
			rep := in.Send(ctx, plan)
			s := in.MeasureSplit(ctx, dep, rs, before, in.Requests+1)
			sum := rep.Summary
			l := report.SweepLevel{Concurrency: c, Requests: in.Requests + 1, Failures: sum.Failed,
				Latency: report.Millis(sum.Latency.P50, sum.Latency.P95, sum.Latency.P99),
				TTFT:    report.Millis(sum.TTFT.P50, sum.TTFT.P95, sum.TTFT.P99)}
			for _, r := range rs {
				l.Replicas = append(l.Replicas, report.ReplicaCount{Replica: r.Name, Address: r.URL(), Count: float64(s.Count(r.Name))})
			}
			sweep.Levels = append(sweep.Levels, l)
			sweep.Source = s.Counter
			levels = append(levels, level{c: c, s: s, failed: sum.Failed})
		}
		report.Record(sweep)
		var measured []string
		for _, l := range levels {
			measured = append(measured, fmt.Sprintf("c=%d %s (%d failed)", l.c, l.s.Ratio(), l.failed))
		}
		in.Record(sweep.Expected, strings.Join(measured, ", "))

		for _, l := range levels {
			if shape.UpTo > 0 && l.c > shape.UpTo {
				continue // beyond what the derivation covers: recorded only
			}
			switch shape.Shape {
			case fixtures.ShapeSpread:
				Expect(l.s).To(assertions.UseEveryReplica(), "concurrency %d: %s", l.c, in.Row.Derivation)
			case fixtures.ShapeOneReplica:
				Expect(l.s).To(assertions.BeAllOnOneReplica(), "concurrency %d: %s", l.c, in.Row.Derivation)
			}
		}
	})
}

// concurrencyWords is the derived shape in words.
func concurrencyWords(c Concurrency) string {
	var w string
	switch c.Shape {
	case fixtures.ShapeSpread:
		w = "every replica used at each level"
	case fixtures.ShapeOneReplica:
		w = "all on one replica at each level"
	default:
		w = "recorded, not asserted"
	}
	if c.UpTo > 0 {
		w += fmt.Sprintf(" up to concurrency %d", c.UpTo)
	}
	return w + "; no failures"
}
