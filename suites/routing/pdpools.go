package routing

import (
	"github.com/gpustack/routing-conformance/api"
)

// ClaimPDPools: a prefill/decode pair under one --policy; each pool picks by
// a policy instance of its own.
const ClaimPDPools = "pdpools"

var _ = register(Claim{
	Name:        ClaimPDPools,
	Title:       "Prefill/decode pools",
	PD:          true,
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require:     requirePD(ClaimPDPools),
	Deployment:  documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		PDPoolsSpec(func() PDSpecInput { return PDSpecInput{Input: input()} })
	},
})

// PDSpecInput is the input of the prefill/decode traffic specs.
type PDSpecInput struct {
	Input
}

// PDPoolsSpec: a prefill/decode pair is admitted and renders the router's
// P/D mode (banner mode VllmPrefillDecode or PrefillDecode); under
// round_robin each pool has its own instance, so pd.requests serial chats
// over two prefill and two decode replicas split evenly in both pools (one
// shared counter would put every prefill on one replica and every decode on
// the other); each request reaches one prefill and one decode engine; the
// router's per-pool counters rise per worker of their pool
// (docs/routers.md#corrections, docs/routers.md#prefill-and-decode-pools).
func PDPoolsSpec(input func() PDSpecInput) {
	pdTrafficSpec("PDPoolsSpec", ClaimPDPools, "gives each pool its own policy instance and sends every request through both pools",
		func() Input { return input().Input })
}
