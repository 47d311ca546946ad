package routing

import (
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimPDPolicies: --prefill-policy and --decode-policy on the router's argv
// route each pool by its own flag where the router honours them, and show
// in the banner either way.
const ClaimPDPolicies = "pdpolicies"

var _ = framework.Add(Registry, framework.Claim[PDTrafficRow]{
	Name:  ClaimPDPolicies,
	Title: "Per-pool policy flags",
	Asserts: "`--prefill-policy round_robin --decode-policy cache_aware` on vllm-router split prefills 4/4 " +
		"and keep decodes on one replica; on sglang-gateway the operator's IGW mode builds both pools from `--policy`, so " +
		"the pool flags show in the banner and route nothing",
	PD:          true,
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Cases:       func(row fixtures.Row, r PDTrafficRow) []framework.Case { return r.PD.shared(row.RouterArgs) },
	Specs:       PDPoliciesSpec,
})

// PDPoliciesSpec: --prefill-policy and --decode-policy on the router's argv show
// in the banner's routing mode. vllm-router honours each for its own pool
// (round_robin on prefill spreads pd.requests serial chats evenly while
// cache_aware on decode keeps them on one replica). sglang-gateway under the
// operator runs in IGW mode, which builds the P/D router from --policy
// alone: the pool flags route nothing (docs/routers.md#corrections).
func PDPoliciesSpec(input func() framework.Input[PDTrafficRow]) {
	pdTrafficSpec("PDPoliciesSpec", "routes each pool by the policy the router actually gives it", input)
}
