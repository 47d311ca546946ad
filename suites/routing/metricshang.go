package routing

// ClaimMetricsHang: one engine's /metrics never answers: the request path is unaffected and the suite's own measurement fails within its interval, naming the Pod.
// The spec is FaultSpec (faults.go); the row's fault and bounds are in
// fixtures/expect.yaml.
const ClaimMetricsHang = "metricshang"

var _ = faultClaim(ClaimMetricsHang, "An engine metrics endpoint that hangs")
