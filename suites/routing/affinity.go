package routing

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// AffinitySpecInput is the input of AffinitySpec.
type AffinitySpecInput struct {
	Target
	Pair fixtures.Pair
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// AffinitySpec: serial chats sharing a ~500-character prefix, each with a
// question of its own, streaming and non-streaming in turn, under the
// default policy. No request fails, and the split measured by engine
// counter deltas per replica has the documented shape.
func AffinitySpec(input func() AffinitySpecInput) {
	const spec = config.SpecAffinity
	var (
		in  AffinitySpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		in.check("AffinitySpec", in.Pair)
		exp = expectation(fixtures.ClaimAffinity, in.Pair)
		in.requireRunnable(in.Pair)
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
	})

	It("routes serial prefix-sharing chats as documented, with no failures", func(ctx SpecContext) {
		dep := in.deployReady(ctx, spec, in.build(in.Pair, objectName(spec, in.Pair)))
		rs := in.replicas(ctx, dep)
		before := scrapeEngines(ctx, dep, rs)
		rep := send(ctx, in.plan(ctx, dep, in.Requests))
		s := in.measureSplit(ctx, spec, dep, in.Pair, rs, before, in.Requests)

		title := fmt.Sprintf("%d serial chats, %d-character shared prefix, streaming and not in turn", in.Requests, in.Config.Traffic.PrefixChars)
		want := shapeWords(*exp.Split, in.Requests, len(rs))
		report.Record(splitEntry(fixtures.ClaimAffinity, in.Pair, title, s, rs, in.Requests, rep.Summary.Failed, want))
		report.Record(report.Claim{Claim: fixtures.ClaimAffinity, Pair: in.Pair.String(), Expected: want,
			Measured: fmt.Sprintf("%s, %d failed", s.Ratio(), rep.Summary.Failed)})
		expectShape(s, *exp.Split, in.Requests)
	})
}

var _ = Describe("Prefix affinity", Label(claimLabels(fixtures.ClaimAffinity, LabelNeedsGPU)...), func() {
	for _, p := range fixtures.DocumentedPairs {
		Describe(p.String(), Label(pairLabels(fixtures.ClaimAffinity, p)...), func() {
			AffinitySpec(func() AffinitySpecInput { return AffinitySpecInput{Target: suite, Pair: p} })
		})
	}
})
