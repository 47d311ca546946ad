package routing

// ClaimPowerOfTwo: --policy power_of_two: two random workers, the lower load.
const ClaimPowerOfTwo = "poweroftwo"

// The spec is PolicySpec, run as fixtures/expect.yaml's poweroftwo row says.
var _ = register(policyClaim(ClaimPowerOfTwo, "Power of two set at creation"))
