package routing

// ClaimRouterHang: the router accepts connections on 8081 and never answers: the suite's traffic fails within <claim>/traffic saying so, instead of hanging the run.
// The spec is FaultSpec (faults.go); the row's fault and bounds are in
// fixtures/expect.yaml.
const ClaimRouterHang = "routerhang"

var _ = faultClaim(ClaimRouterHang, "A router that accepts connections and never answers")
