package routing

// ClaimPrefixHash: --policy prefix_hash over HTTP, which carries no token ids (sglang-gateway).
const ClaimPrefixHash = "prefixhash"

// The spec is PolicySpec, run as fixtures/expect.yaml's prefixhash row says.
var _ = register(policyClaim(ClaimPrefixHash, "Prefix hash set at creation"))
