package routing

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// ClaimConcurrency: the affinity traffic at each configured concurrency.
const ClaimConcurrency = "concurrency"

var _ = register(Claim{
	Name:        ClaimConcurrency,
	Title:       "Concurrent spread",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		return need(nil, e.Concurrency != nil, "concurrency needs concurrency.shape")
	},
	// The default deployment: each level's prompts start with a fresh
	// nonce and its split is a delta over its own requests.
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		ConcurrencySpec(func() ConcurrencySpecInput { return ConcurrencySpecInput{Input: input()} })
	},
})

// ConcurrencySpecInput is the input of ConcurrencySpec.
type ConcurrencySpecInput struct {
	Input
	// Levels overrides traffic.concurrency when set.
	Levels []int
	// Requests overrides traffic.requests (per level) when > 0.
	Requests int
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
	var (
		in  ConcurrencySpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("ConcurrencySpec", ClaimConcurrency)
		if in.Levels == nil {
			in.Levels = in.Config.Traffic.Concurrency
		}
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
	})

	It("routes concurrent prefix-sharing chats as the algorithm implies at every level, with no failures", func(ctx SpecContext) {
		dep := in.ready(ctx, ClaimConcurrency, exp.RouterArgs)
		rs := in.replicas(ctx, dep)
		shape := exp.Concurrency
		sweep := report.Sweep{Claim: ClaimConcurrency, Pair: in.Pair.String(), Expected: concurrencyWords(*shape),
			Title: fmt.Sprintf("1 warm-up + %d chats per level, %d-character shared prefix, streaming and not in turn", in.Requests, in.Config.Traffic.PrefixChars)}
		type level struct {
			c      int
			s      split.Split
			failed int
		}
		var levels []level
		for _, c := range in.Levels {
			before := scrapeEngines(ctx, dep, rs)
			plan := in.plan(ctx, dep, 1)
			warm := in.send(ctx, ClaimConcurrency, plan)
			// The same prefix: the level continues the warm-up's prompts.
			plan.Prompts.Nonce = warm.Plan.Prompts.Nonce
			plan.Requests, plan.Concurrency, plan.FirstIndex = in.Requests, c, 1
			rep := in.send(ctx, ClaimConcurrency, plan)
			s := in.measureSplit(ctx, ClaimConcurrency, dep, in.Pair, rs, before, in.Requests+1)
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
		report.Record(report.Claim{Claim: ClaimConcurrency, Pair: in.Pair.String(), Expected: sweep.Expected, Measured: strings.Join(measured, ", ")})

		for _, l := range levels {
			if shape.UpTo > 0 && l.c > shape.UpTo {
				continue // beyond what the derivation covers: recorded only
			}
			switch shape.Shape {
			case fixtures.ShapeSpread:
				Expect(l.s).To(assertions.UseEveryReplica(), "concurrency %d: %s", l.c, exp.Derivation)
			case fixtures.ShapeOneReplica:
				Expect(l.s).To(assertions.BeAllOnOneReplica(), "concurrency %d: %s", l.c, exp.Derivation)
			}
		}
	})
}

// concurrencyWords is the derived shape in words.
func concurrencyWords(c fixtures.Concurrency) string {
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
