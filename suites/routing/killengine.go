package routing

// ClaimKillEngine: the busiest engine Pod killed with a zero grace period while traffic runs (clusters.FaultInjector.KillEnginePod).
// The spec is FaultSpec (faults.go); the row's fault and bounds are in
// fixtures/expect.yaml.
const ClaimKillEngine = "killengine"

var _ = faultClaim(ClaimKillEngine, "An engine Pod killed mid-traffic")
