package routing

import (
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimPDPools: a prefill/decode pair under one --policy gives each pool a
// policy instance of its own, and every request passes through both.
const ClaimPDPools = "pdpools"

var _ = framework.Add(Registry, framework.Claim[PDTrafficRow]{
	Name:  ClaimPDPools,
	Title: "Prefill/decode pools",
	Asserts: "a pair of 2 prefill + 2 decode replicas is admitted and the banner shows the router's P/D " +
		"mode; each pool has a policy instance of its own, so 8 serial chats under `round_robin` split 4/4 in both pools; " +
		"every chat reaches one prefill and one decode engine; `vllm_router_pd_prefill_requests_total{worker}`/" +
		"`vllm_router_pd_decode_requests_total{worker}` +4 per worker of their pool, " +
		"`smg_worker_selection_total{worker_type=\"prefill\"\\|\"decode\"}` +8 each",
	PD:          true,
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Cases:       func(row fixtures.Row, r PDTrafficRow) []framework.Case { return r.PD.shared(row.RouterArgs) },
	Specs:       PDPoolsSpec,
})

// PDPoolsSpec: a prefill/decode pair is admitted and renders the router's
// P/D mode (banner mode VllmPrefillDecode or PrefillDecode); under
// round_robin each pool has its own instance, so pd.requests serial chats
// over two prefill and two decode replicas split evenly in both pools (one
// shared counter would put every prefill on one replica and every decode on
// the other); each request reaches one prefill and one decode engine; the
// router's per-pool counters rise per worker of their pool
// (docs/routers.md#corrections, docs/routers.md#prefill-and-decode-pools).
func PDPoolsSpec(input func() framework.Input[PDTrafficRow]) {
	pdTrafficSpec("PDPoolsSpec", "gives each pool its own policy instance and sends every request through both pools", input)
}
