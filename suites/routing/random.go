package routing

// ClaimRandom: --policy random: a uniform random pick per request.
const ClaimRandom = "random"

// The spec is PolicySpec, run as fixtures/expect.yaml's random row says.
var _ = register(policyClaim(ClaimRandom, "Random policy set at creation"))
