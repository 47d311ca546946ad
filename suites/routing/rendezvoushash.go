package routing

import "github.com/gpustack/routing-conformance/suites/framework"

// ClaimRendezvousHash: vllm-router's --policy rendezvous_hash sends a
// session key to the worker with the highest hash of key and address: as
// consistent_hash, every x-session-id value keeps one replica, many values
// use every replica, chats without the header share one (PolicySpec with
// keyed traffic).
const ClaimRendezvousHash = "rendezvoushash"

var _ = framework.Add(Registry, policyClaim(ClaimRendezvousHash, "Rendezvous hash",
	"vllm-router `--policy rendezvous_hash`: as `consistenthash` with banner `policy: RendezvousHash`"))
