package routing

import "github.com/gpustack/routing-conformance/suites/framework"

// ClaimConsistentHash: vllm-router's --policy consistent_hash maps a
// session key on a hash ring, so every chat with the same x-session-id
// lands on one replica, many keys use every replica, and chats without the
// header share one constant key and one replica (PolicySpec with keyed
// traffic).
const ClaimConsistentHash = "consistenthash"

var _ = framework.Add(Registry, policyClaim(ClaimConsistentHash, "Consistent hash",
	"vllm-router `--policy consistent_hash`: banner; 16 `x-session-id` values × 4 chats, each value on one replica and "+
		"the values over both; 8 chats without the header on one replica (`request:` key)"))
