package routing

import "github.com/gpustack/routing-conformance/suites/framework"

// ClaimPrefixHash: sglang-gateway's --policy prefix_hash routes by token
// ids, which its HTTP router never has: every chat is refused with 503
// no_available_workers after the policy ran on each of its attempts, and
// no engine sees one (PolicySpec with refusals).
const ClaimPrefixHash = "prefixhash"

var _ = framework.Add(Registry, policyClaim(ClaimPrefixHash, "Prefix hash",
	"sglang-gateway `--policy prefix_hash` over HTTP: banner; every chat 503 `no_available_workers` (body and "+
		"`X-SMG-Error-Code`), no engine sees one, `smg_prefix_hash_policy_branch_total{branch=\"no_tokens\"}` +5 per chat "+
		"(5 attempts)"))
