package routing

import (
	"github.com/gpustack/routing-conformance/api"
)

// ClaimPDPolicies: --prefill-policy and --decode-policy set at creation.
const ClaimPDPolicies = "pdpolicies"

var _ = register(Claim{
	Name:        ClaimPDPolicies,
	Title:       "Per-pool policy flags",
	PD:          true,
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require:     requirePD(ClaimPDPolicies),
	Deployment:  documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		PDPoliciesSpec(func() PDSpecInput { return PDSpecInput{Input: input()} })
	},
})

// PDPoliciesSpec: --prefill-policy and --decode-policy set at creation show
// in the banner's routing mode. vllm-router honours each for its own pool
// (round_robin on prefill spreads pd.requests serial chats evenly while
// cache_aware on decode keeps them on one replica). sglang-gateway under the
// operator runs in IGW mode, which builds the P/D router from --policy
// alone: the pool flags route nothing (docs/routers.md#corrections).
func PDPoliciesSpec(input func() PDSpecInput) {
	pdTrafficSpec("PDPoliciesSpec", ClaimPDPolicies, "routes each pool by the policy the router actually gives it",
		func() Input { return input().Input })
}
