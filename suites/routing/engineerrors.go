package routing

// ClaimEngineErrors: the replica serial traffic goes to answers a 5xx on its OpenAI paths (clusters.FaultInjector.InjectHTTPFault); the routers' retries and circuit breaker are counted.
// The spec is FaultSpec (faults.go); the row's fault and bounds are in
// fixtures/expect.yaml.
const ClaimEngineErrors = "engineerrors"

var _ = faultClaim(ClaimEngineErrors, "An engine answering 5xx")
