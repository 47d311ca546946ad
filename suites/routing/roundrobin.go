package routing

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimRoundRobin: --policy round_robin on the router's argv splits serial
// requests evenly and the routers count every pick.
const ClaimRoundRobin = "roundrobin"

// RoundRobinRow is what roundrobin's rows state (its routerArgs are the
// --policy).
type RoundRobinRow struct {
	Banner framework.Banner `json:"banner"`
	// Split is the documented even split.
	Split fixtures.Split `json:"split"`
	// Series are the router's pick counters and how they rise.
	Series []fixtures.Series `json:"series"`
}

var _ = framework.Add(Registry, framework.Claim[RoundRobinRow]{
	Name:  ClaimRoundRobin,
	Title: "Round robin",
	Asserts: "`--policy round_robin`: banner `policy: RoundRobin`; 120 requests give 60/60; " +
		"`vllm_router_policy_decisions_total{policy=\"round_robin\"}` +60 per worker; `smg_worker_selection_total{policy=\"round_robin\"}` +120",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Specs: func(input func() framework.Input[RoundRobinRow]) {
		RoundRobinSpec(func() RoundRobinSpecInput { return RoundRobinSpecInput{Input: input()} })
	},
})

// RoundRobinSpecInput is the input of RoundRobinSpec.
type RoundRobinSpecInput struct {
	framework.Input[RoundRobinRow]
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// Check implements framework.SpecInput.
func (in RoundRobinSpecInput) Check() error { return checkRequests(in.Spec, in.Requests) }

// RoundRobinSpec: --policy round_robin on the router's argv. The banner reads
// policy: RoundRobin; N serial requests split N/replicas each by engine
// counts; the router's own counters rise as documented (vllm-router's
// policy decisions per worker, sglang-gateway's selections in all).
func RoundRobinSpec(input func() RoundRobinSpecInput) {
	framework.CheckInput("RoundRobinSpec", input)
	var in RoundRobinSpecInput
	BeforeEach(func() {
		in = input()
		in.Begin()
		in.Requests = in.RequestsOr(in.Requests)
		Expect(in.Expect.Split.Expected(in.Requests, int(in.Config.Replicas))).NotTo(BeNil(),
			"%d requests do not divide evenly over %d replicas; set traffic.requests (or E2E_REQUESTS) to a multiple", in.Requests, in.Config.Replicas)
	})

	It("logs policy: RoundRobin, splits requests evenly and counts every pick", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		b := in.WaitBanner(ctx, dep)
		in.RecordBanner(string(in.Expect.Banner), b)
		framework.ExpectBanner(b, in.Expect.Banner)

		rs := in.Replicas(ctx, dep)
		routerBefore := framework.RouterMetrics(ctx, dep)
		before := framework.ScrapeEngines(ctx, dep, rs)
		rep := in.Send(ctx, in.ChatPlan(ctx, dep, in.Requests))
		s := in.MeasureSplit(ctx, dep, rs, before, in.Requests)
		want := framework.ShapeWords(in.Expect.Split, in.Requests, len(rs))
		in.RecordSplit(fmt.Sprintf("%d serial chats, --policy round_robin", in.Requests), s, rs, in.Requests, rep.Summary.Failed, want)

		measured := []string{s.Ratio()}
		var rises []framework.Reading
		for _, series := range in.Expect.Series {
			words, r := in.SeriesDelta(ctx, dep, routerBefore, series, rs, in.Requests)
			measured = append(measured, words)
			rises = append(rises, r)
		}
		in.Record(in.Row.Summary, strings.Join(measured, "; "))
		framework.ExpectShape(s, in.Expect.Split, in.Requests)
		for _, r := range rises {
			r.Expect()
		}
	})
}
