package routing

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/suites/framework"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimThresholds: the three cache_aware thresholds, each set on a router
// Pod that starts with them, show in the banner and move single picks
// exactly as the policy's rules imply, with every load a pick sees known.
const ClaimThresholds = "thresholds"

// lbEvents is vllm-router's counter of picks made by the imbalance rule
// (docs/routers.md#vllm-router-series).
const lbEvents = "vllm_router_load_balancing_events_total"

// ThresholdsRow is what thresholds' rows state.
type ThresholdsRow struct {
	// InFlight is the router's per-worker in-flight gauge that confirms
	// each held request's dispatch.
	InFlight framework.InFlightGauge `json:"inFlight"`
	// Thresholds lists the settings, each a case.
	Thresholds []HeldCase `json:"thresholds"`
}

// Check implements yamlbind.Checker.
func (r ThresholdsRow) Check() []string {
	return uniqueNames("thresholds", r.Thresholds, func(h HeldCase) string { return h.Name })
}

// HeldCase is one cache_aware setting and what N identical-prefix
// completions held in flight one after another do under it.
type HeldCase struct {
	// Name is unique in the row.
	Name string `json:"name"`
	// RouterArgs are the router args the case runs with (none: the
	// router's defaults).
	RouterArgs []string `json:"routerArgs,omitempty"`
	// Banner is the policy the router prints with these thresholds.
	Banner framework.Banner `json:"banner"`
	// Held is how many requests are held: completions sharing a prefix of
	// PrefixChars characters, each followed by its own question.
	Held        int `json:"held"`
	PrefixChars int `json:"prefixChars"`
	// Counts are the requests in flight per replica once all are held,
	// the replica of the first held request first.
	Counts []int `json:"counts"`
	// ImbalanceEvents is the rise of vllm_router_load_balancing_events_total
	// over the held requests (vllm-router only; nil: not checked).
	ImbalanceEvents *int `json:"imbalanceEvents,omitempty"`
	// Why is the derivation of Counts.
	Why string `json:"why"`
}

// Check implements yamlbind.Checker.
func (h HeldCase) Check() []string {
	var out []string
	if !strings.HasPrefix(string(h.Banner), "policy: CacheAware {") {
		out = append(out, `banner must be "policy: CacheAware { ... }"`)
	}
	sum := 0
	for _, c := range h.Counts {
		sum += c
	}
	if h.Held < 1 || sum != h.Held {
		out = append(out, fmt.Sprintf("counts %v must add up to held %d", h.Counts, h.Held))
	}
	if h.PrefixChars < 1 {
		out = append(out, "prefixChars must be > 0 (the match rates of the derivation depend on it)")
	}
	return out
}

var _ = framework.Add(Registry, framework.Claim[ThresholdsRow]{
	Name:  ClaimThresholds,
	Title: "Cache-aware thresholds",
	Asserts: "`--cache-threshold 0.9`, `--balance-abs-threshold 1`, and with `--balance-rel-threshold 3`, each edited into " +
		"the shared deployment (a new router Pod): the banner shows the value, and 8 prefix-sharing completions held in flight " +
		"one after another split 8/0, 4/4, 5/3, 6/2 by the router's in-flight gauge and the engines; vllm-router's " +
		"imbalance counter +0, +0, +3, +2",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	// Each case runs on the shared deployment with its own args (edited in
	// when they differ: a new router Pod, with nothing held or in flight);
	// it holds fresh prompts once nothing is in flight.
	Cases: func(row fixtures.Row, r ThresholdsRow) []framework.Case {
		var out []framework.Case
		for _, h := range r.Thresholds {
			args := row.RouterArgs
			if len(h.RouterArgs) > 0 {
				args = h.RouterArgs
			}
			out = append(out, framework.Case{Name: h.Name, Deployment: framework.Shared(args)})
		}
		return out
	},
	Specs: func(input func() framework.Input[ThresholdsRow]) {
		ThresholdSpec(func() ThresholdSpecInput {
			in := input()
			return ThresholdSpecInput{Input: in, Held: caseOf(in.Case.Name, in.Expect.Thresholds, func(c HeldCase) string { return c.Name })}
		})
	},
})

// ThresholdSpecInput is the input of ThresholdSpec.
type ThresholdSpecInput struct {
	framework.Input[ThresholdsRow]
	// Held is the row's case the spec runs.
	Held *HeldCase
}

// Check implements framework.SpecInput.
func (in ThresholdSpecInput) Check() error {
	return checkCase(in.Spec, "Held", "thresholds", in.Held)
}

// ThresholdSpec: one cache_aware setting. The banner shows it; then the
// case's completions, sharing a prefix, are held in flight one after
// another, each dispatch confirmed by the router's in-flight gauge, so
// every pick sees known loads. Once all are held the gauge per replica
// reads the derived counts (the first held request's replica first), the
// engines count the same once they finish, and vllm-router's imbalance
// counter rose by the derived number of imbalance picks.
func ThresholdSpec(input func() ThresholdSpecInput) {
	framework.CheckInput("ThresholdSpec", input)
	var (
		in ThresholdSpecInput
		hc HeldCase
	)
	BeforeEach(func() {
		in = input()
		in.Begin()
		hc = *in.Held
		if int(in.Config.Replicas) != len(hc.Counts) {
			Skip(fmt.Sprintf("the %s case is derived for %d replicas and this run has %d (replicas in %s)", hc.Name, len(hc.Counts), in.Config.Replicas, in.Config.File()))
		}
	})

	It("logs the thresholds and splits held requests as they imply", func(ctx SpecContext) {
		args := strings.Join(hc.RouterArgs, " ")
		if args == "" {
			args = "the router's defaults"
		}
		dep := in.Ready(ctx)
		b := in.WaitBanner(ctx, dep)
		in.RecordBanner(string(hc.Banner), b)
		framework.ExpectBanner(b, hc.Banner)

		rs := in.Replicas(ctx, dep)
		routerBefore := framework.RouterMetrics(ctx, dep)
		before := framework.ScrapeEngines(ctx, dep, rs)
		plan := in.ChatPlan(ctx, dep, 1)
		plan.Endpoint = traffic.EndpointCompletions
		plan.Prompts = traffic.PromptSet{Kind: traffic.PromptsSharedPrefix, PrefixChars: hc.PrefixChars, Nonce: newHex()}
		h := in.StartHolds(ctx, dep, rs, in.Expect.InFlight)
		for k := range hc.Held {
			p := plan
			p.FirstIndex = k
			h.Hold(ctx, p)
		}
		first := h.Order[0]
		want := map[string]int{}
		for _, r := range rs {
			if r.Name != first {
				want[r.Name] = hc.Counts[1]
			}
		}
		want[first] = hc.Counts[0]
		held := h.ExpectInFlight(ctx)
		h.Release()
		s := in.MeasureSplit(ctx, dep, rs, before, hc.Held)
		title := fmt.Sprintf("%s: %d completions sharing a %d-character prefix, held in flight one after another", hc.Name, hc.Held, hc.PrefixChars)
		in.RecordSplit(title, s, rs, hc.Held, 0, fmt.Sprintf("%v, the first held request's replica first", hc.Counts))

		measured := []string{fmt.Sprintf("%s (%s): in flight %s, engines %s", hc.Name, args, countsWords(held, first, rs), s.Ratio())}
		var lb *framework.Reading
		if hc.ImbalanceEvents != nil {
			// The series exists only after the first imbalance pick
			// (docs/routers.md#exporter): absent reads as no rise.
			r := in.SettleRouter(ctx, dep, fmt.Sprintf("the rise of the router's %s", lbEvents),
				assertions.HaveLazyCounterRisenBy(routerBefore, lbEvents, float64(*hc.ImbalanceEvents)))
			if d, err := deltaOrZero(routerBefore, r.After, lbEvents); err == nil && r.Err == nil {
				measured = append(measured, fmt.Sprintf("%s +%v", lbEvents, d))
			}
			lb = &r
		}
		in.Record(fmt.Sprintf("%s: %s; %v in flight", hc.Name, hc.Banner, hc.Counts), strings.Join(measured, "; "))

		gauge := split.New(in.Expect.InFlight.Name+" (in flight)", framework.ReplicaNames(rs), held)
		Expect(gauge).To(assertions.HaveCountsByReplica(want), "requests in flight per replica once all %d were held (first held on %s): %s", hc.Held, first, hc.Why)
		Expect(s).To(assertions.HaveCountsByReplica(want), "engine counts of the held requests: %s", hc.Why)
		if lb != nil {
			lb.Expect()
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
