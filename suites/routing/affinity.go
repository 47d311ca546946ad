package routing

import (
	"context"
	"fmt"
	"maps"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimAffinity: serial chats sharing a long prefix, under the default
// policy, split across the replicas as the routing page measured them.
const ClaimAffinity = "affinity"

// AffinityRow is what affinity's rows state.
type AffinityRow struct {
	// Split is the documented split of the serial chats.
	Split fixtures.Split `json:"split"`
}

var _ = framework.Add(Registry, framework.Claim[AffinityRow]{
	Name:  ClaimAffinity,
	Title: "Prefix affinity",
	Asserts: "serial chats sharing ~500 characters, streaming and not in turn: no failures; the split from engine counter " +
		"deltas matches (all on one replica for vllm-router, sglang-gateway, llm-d+SGLang)",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Specs: func(input func() framework.Input[AffinityRow]) {
		AffinitySpec(func() AffinitySpecInput { return AffinitySpecInput{Input: input()} })
	},
})

// AffinitySpecInput is the input of AffinitySpec.
type AffinitySpecInput struct {
	framework.Input[AffinityRow]
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// Check implements framework.SpecInput.
func (in AffinitySpecInput) Check() error { return checkRequests(in.Spec, in.Requests) }

// AffinitySpec: serial chats sharing a ~500-character prefix, each with a
// question of its own, streaming and non-streaming in turn, under the
// default policy. No request fails, and the split measured by engine
// counter deltas per replica has the documented shape.
func AffinitySpec(input func() AffinitySpecInput) {
	framework.CheckInput("AffinitySpec", input)
	var in AffinitySpecInput
	BeforeEach(func() {
		in = input()
		in.Begin()
		in.Requests = in.RequestsOr(in.Requests)
	})

	It("routes serial prefix-sharing chats as documented, with no failures", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		rs := in.Replicas(ctx, dep)
		before := framework.ScrapeEngines(ctx, dep, rs)
		rep := in.Send(ctx, in.ChatPlan(ctx, dep, in.Requests))
		s := in.MeasureSplit(ctx, dep, rs, before, in.Requests)

		title := fmt.Sprintf("%d serial chats, %d-character shared prefix, streaming and not in turn", in.Requests, in.Config.Traffic.PrefixChars)
		want := framework.ShapeWords(in.Expect.Split, in.Requests, len(rs))
		in.RecordSplit(title, s, rs, in.Requests, rep.Summary.Failed, want)
		recordPickerSeeds(ctx, in.Spec, dep)
		in.Record(want, fmt.Sprintf("%s, %d failed", s.Ratio(), rep.Summary.Failed))
		framework.ExpectShape(s, in.Expect.Split, in.Requests)
	})
}

// recordPickerSeeds records each llm-d EPP's tie-break seed when the target
// knows it (clusters.PickerSeeder): the split of tied scores depends on it.
func recordPickerSeeds(ctx context.Context, in framework.Spec, dep clusters.Deployment) {
	GinkgoHelper()
	seeder, ok := dep.(clusters.PickerSeeder)
	if !ok || in.Pair.Router != api.RouterLLMD {
		return
	}
	seeds, err := seeder.PickerSeeds(ctx)
	Expect(err).NotTo(HaveOccurred(), "reading the EPP picker seeds")
	for _, pod := range slices.Sorted(maps.Keys(seeds)) {
		report.Record(report.PickerSeed{Claim: in.Claim, Pair: in.Pair.String(), Pod: pod, Seed: seeds[pod]})
	}
}
