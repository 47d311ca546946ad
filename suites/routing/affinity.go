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
)

// ClaimAffinity: serial prefix-sharing chats under the default policy.
const ClaimAffinity = "affinity"

var _ = register(Claim{
	Name:        ClaimAffinity,
	Title:       "Prefix affinity",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		return need(nil, e.Split != nil, "affinity needs split")
	},
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		AffinitySpec(func() AffinitySpecInput { return AffinitySpecInput{Input: input()} })
	},
})

// AffinitySpecInput is the input of AffinitySpec.
type AffinitySpecInput struct {
	Input
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// AffinitySpec: serial chats sharing a ~500-character prefix, each with a
// question of its own, streaming and non-streaming in turn, under the
// default policy. No request fails, and the split measured by engine
// counter deltas per replica has the documented shape.
func AffinitySpec(input func() AffinitySpecInput) {
	var (
		in  AffinitySpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("AffinitySpec", ClaimAffinity)
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
	})

	It("routes serial prefix-sharing chats as documented, with no failures", func(ctx SpecContext) {
		dep := in.ready(ctx, ClaimAffinity, exp.RouterArgs)
		rs := in.replicas(ctx, dep)
		before := scrapeEngines(ctx, dep, rs)
		rep := in.send(ctx, ClaimAffinity, in.plan(ctx, dep, in.Requests))
		s := in.measureSplit(ctx, ClaimAffinity, dep, in.Pair, rs, before, in.Requests)

		title := fmt.Sprintf("%d serial chats, %d-character shared prefix, streaming and not in turn", in.Requests, in.Config.Traffic.PrefixChars)
		want := shapeWords(*exp.Split, in.Requests, len(rs))
		report.Record(splitEntry(ClaimAffinity, in.Pair, title, s, rs, in.Requests, rep.Summary.Failed, want))
		recordPickerSeeds(ctx, ClaimAffinity, in.Pair, dep)
		report.Record(report.Claim{Claim: ClaimAffinity, Pair: in.Pair.String(), Expected: want,
			Measured: fmt.Sprintf("%s, %d failed", s.Ratio(), rep.Summary.Failed)})
		expectShape(s, *exp.Split, in.Requests)
	})
}

// recordPickerSeeds records each llm-d EPP's tie-break seed when the target
// knows it (clusters.PickerSeeder): the split of tied scores depends on it.
func recordPickerSeeds(ctx context.Context, claim string, p api.Pair, dep clusters.Deployment) {
	GinkgoHelper()
	seeder, ok := dep.(clusters.PickerSeeder)
	if !ok || p.Router != api.RouterLLMD {
		return
	}
	seeds, err := seeder.PickerSeeds(ctx)
	Expect(err).NotTo(HaveOccurred(), "reading the EPP picker seeds")
	for _, pod := range slices.Sorted(maps.Keys(seeds)) {
		report.Record(report.PickerSeed{Claim: claim, Pair: p.String(), Pod: pod, Seed: seeds[pod]})
	}
}
