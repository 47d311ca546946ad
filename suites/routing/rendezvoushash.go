package routing

// ClaimRendezvousHash: --policy rendezvous_hash: the highest hash of key and worker (vllm-router).
const ClaimRendezvousHash = "rendezvoushash"

// The spec is PolicySpec, run as fixtures/expect.yaml's rendezvoushash row says.
var _ = register(policyClaim(ClaimRendezvousHash, "Rendezvous hash set at creation"))
