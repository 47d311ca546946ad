package routing

import (
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
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimThresholds: the three cache_aware thresholds set at creation.
const ClaimThresholds = "thresholds"

// lbEvents is vllm-router's counter of picks made by the imbalance rule
// (docs/routers.md#vllm-router-series).
const lbEvents = "vllm_router_load_balancing_events_total"

var _ = register(Claim{
	Name:        ClaimThresholds,
	Title:       "Cache-aware thresholds",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		out := need(nil, len(e.Thresholds) > 0 && e.InFlight != nil && e.InFlight.WorkerLabel != "",
			"thresholds needs thresholds cases and the inFlight gauge with its workerLabel")
		for _, h := range e.Thresholds {
			out = requireBanner(out, h.Banner)
		}
		return out
	},
	// The case without router args runs on the default deployment (it holds
	// fresh prompts once nothing is in flight); each other case creates a
	// deployment of its own with its args, deleted when it ends.
	Deployment: documentedArgs,
	Spec: func(p api.Pair, input func() Input) {
		describeCases(ClaimThresholds, p, "any setting", thresholdCases, func(name string) {
			ThresholdSpec(func() ThresholdSpecInput { return ThresholdSpecInput{Input: input(), Case: name} })
		})
	},
})

// ThresholdSpecInput is the input of ThresholdSpec.
type ThresholdSpecInput struct {
	Input
	// Case names the thresholds case of the pair's row ("" for a pair the
	// claim does not apply to: the spec skips with the reason).
	Case string
}

// ThresholdSpec: one cache_aware setting. The banner shows it; then the
// case's completions, sharing a prefix, are held in flight one after
// another, each dispatch confirmed by the router's in-flight gauge, so
// every pick sees known loads. Once all are held the gauge per replica
// reads the derived counts (the first held request's replica first), the
// engines count the same once they finish, and vllm-router's imbalance
// counter rose by the derived number of imbalance picks.
func ThresholdSpec(input func() ThresholdSpecInput) {
	var (
		in  ThresholdSpecInput
		exp fixtures.Expectation
		hc  fixtures.HeldCase
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("ThresholdSpec", ClaimThresholds)
		hc = findCase(exp.Thresholds, func(c fixtures.HeldCase) string { return c.Name }, in.Case, "thresholds case", in.Pair)
		if int(in.Config.Replicas) != len(hc.Counts) {
			Skip(fmt.Sprintf("the %s case is derived for %d replicas and this run has %d (replicas in %s)", hc.Name, len(hc.Counts), in.Config.Replicas, in.Config.File()))
		}
	})

	It("logs the thresholds and splits held requests as they imply", func(ctx SpecContext) {
		args := strings.Join(hc.RouterArgs, " ")
		dep := in.ready(ctx, ClaimThresholds, exp.RouterArgs)
		if len(hc.RouterArgs) > 0 {
			dep = in.own(in.Pair, objectName("thr-"+hc.Name, in.Pair), hc.RouterArgs...).Ready(ctx, in.Target, ClaimThresholds)
		} else {
			args = "the router's defaults"
		}
		b := in.waitBanner(ctx, ClaimThresholds, dep)
		report.Record(report.Banner{Claim: ClaimThresholds, Pair: in.Pair.String(), Expected: hc.Banner, Line: b.Summary()})
		expectBanner(b, hc.Banner)

		rs := in.replicas(ctx, dep)
		routerBefore := routerMetrics(ctx, dep)
		before := scrapeEngines(ctx, dep, rs)
		plan := in.plan(ctx, dep, 1)
		plan.Endpoint = traffic.EndpointCompletions
		plan.Prompts = traffic.PromptSet{Kind: traffic.PromptsSharedPrefix, PrefixChars: hc.PrefixChars, Nonce: newHex()}
		h := in.startHolds(ctx, ClaimThresholds, dep, rs, *exp.InFlight)
		for k := range hc.Held {
			p := plan
			p.FirstIndex = k
			h.hold(ctx, p)
		}
		first := h.order[0]
		want := map[string]int{}
		for _, r := range rs {
			if r.Name != first {
				want[r.Name] = hc.Counts[1]
			}
		}
		want[first] = hc.Counts[0]
		held := h.expectInFlight(ctx)
		h.release()
		s := in.measureSplit(ctx, ClaimThresholds, dep, in.Pair, rs, before, hc.Held)
		title := fmt.Sprintf("%s: %d completions sharing a %d-character prefix, held in flight one after another", hc.Name, hc.Held, hc.PrefixChars)
		report.Record(splitEntry(ClaimThresholds, in.Pair, title, s, rs, hc.Held, 0, fmt.Sprintf("%v, the first held request's replica first", hc.Counts)))

		measured := []string{fmt.Sprintf("%s (%s): in flight %s, engines %s", hc.Name, args, countsWords(held, first, rs), s.Ratio())}
		var lb *reading
		if hc.ImbalanceEvents != nil {
			n := float64(*hc.ImbalanceEvents)
			// The series exists only after the first imbalance pick
			// (docs/routers.md#exporter): absent reads as no rise.
			rise := WithTransform(func(after metrics.Snapshot) (float64, error) { return deltaOrZero(routerBefore, after, lbEvents) }, Equal(n))
			r := reading{what: fmt.Sprintf("the rise of the router's %s", lbEvents), matcher: rise}
			r.after, r.err = settle(ctx, in.Target, ClaimThresholds, config.OpWaitMetrics, dep.RouterMetrics, r.matcher)
			if d, err := deltaOrZero(routerBefore, r.after, lbEvents); err == nil {
				measured = append(measured, fmt.Sprintf("%s +%v", lbEvents, d))
			}
			lb = &r
		}
		report.Record(report.Claim{Claim: ClaimThresholds, Pair: in.Pair.String(),
			Expected: fmt.Sprintf("%s: %s; %v in flight", hc.Name, hc.Banner, hc.Counts), Measured: strings.Join(measured, "; ")})

		Expect(held).To(Equal(want), "requests in flight per replica once all %d were held (first held on %s): %s", hc.Held, first, hc.Why)
		Expect(s).To(assertions.HaveCountsByReplica(want), "engine counts of the held requests: %s", hc.Why)
		if lb != nil {
			lb.expect()
		}
	})
}

// countsWords is the in-flight counts, the first held request's replica first.
func countsWords(held map[string]int, first string, rs []clusters.Replica) string {
	parts := []string{fmt.Sprintf("%s=%d", first, held[first])}
	for _, r := range rs {
		if r.Name != first {
			parts = append(parts, fmt.Sprintf("%s=%d", r.Name, held[r.Name]))
		}
	}
	return strings.Join(parts, ", ")
}

// deltaOrZero is a counter's rise, treating a series that does not exist
// yet as 0 (vllm-router creates it on the first imbalance pick).
func deltaOrZero(before, after metrics.Snapshot, name string) (float64, error) {
	b, err := before.Sum(name)
	if err != nil && !metrics.IsNoSeries(err) {
		return 0, err
	}
	a, err := after.Sum(name)
	if err != nil && !metrics.IsNoSeries(err) {
		return 0, err
	}
	return a - b, nil
}

// thresholdCases names the thresholds cases of a row.
func thresholdCases(e fixtures.Expectation) []string {
	var out []string
	for _, c := range e.Thresholds {
		out = append(out, c.Name)
	}
	return out
}
