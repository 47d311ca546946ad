package routing

// ClaimDeleteRouter: kubectl delete pod on the router Pod while traffic runs (clusters.FaultInjector.DeleteRouterPod).
// The spec is FaultSpec (faults.go); the row's fault and bounds are in
// fixtures/expect.yaml.
const ClaimDeleteRouter = "deleterouter"

var _ = faultClaim(ClaimDeleteRouter, "The router Pod deleted mid-traffic")
