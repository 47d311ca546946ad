package routing

import "github.com/gpustack/routing-conformance/suites/framework"

// ClaimManual: sglang-gateway's --policy manual remembers the worker it
// first picked for each X-SMG-Routing-Key value: every later request with
// the key goes there, keys spread over the replicas, and its branch
// counters say which rule served each request (vacant, occupied_hit,
// no_routing_id) while a gauge counts the keys remembered (PolicySpec with
// keyed traffic and branches).
const ClaimManual = "manual"

var _ = framework.Add(Registry, policyClaim(ClaimManual, "Manual routing",
	"sglang-gateway `--policy manual`: banner; 16 `X-SMG-Routing-Key` values × 4 chats sticky, over both replicas; "+
		"`smg_manual_policy_branch_total` vacant +16, occupied_hit +48, no_routing_id +8; 16 cache entries"))
