package routing

// ClaimConsistentHash: --policy consistent_hash: a hash ring keyed by a session header (vllm-router).
const ClaimConsistentHash = "consistenthash"

// The spec is PolicySpec, run as fixtures/expect.yaml's consistenthash row says.
var _ = register(policyClaim(ClaimConsistentHash, "Consistent hash set at creation"))
