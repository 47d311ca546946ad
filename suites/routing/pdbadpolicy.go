package routing

import (
	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/fixtures"
)

// ClaimPDBadPolicy: an unknown --prefill-policy or --decode-policy stops
// the router of a prefill/decode pair at startup.
const ClaimPDBadPolicy = "pdbadpolicy"

var _ = register(Claim{
	Name:   ClaimPDBadPolicy,
	Title:  "Bad per-pool policy",
	PD:     true,
	Labels: []string{"policy:invalid", LabelNeedsGPU},
	Require: func(e fixtures.Expectation) []string {
		out := need(nil, e.BadPolicy != nil && len(e.BadPolicy.Values) > 0 && len(e.BadPolicy.PossibleValues) > 0,
			"pdbadpolicy needs badPolicy.values and possibleValues")
		return need(out, e.PD != nil, "pdbadpolicy needs pd (the pair each bad value is created on)")
	},
	// Each bad value is a pair of its own, deleted as soon as the crash is
	// confirmed (BadPolicySpec).
	Deployment: nil,
	Spec:       func(p api.Pair, input func() Input) { describeBadValues(ClaimPDBadPolicy, p, input) },
})
