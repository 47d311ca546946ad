package routing

// ClaimManual: --policy manual: sticky routing by X-SMG-Routing-Key (sglang-gateway).
const ClaimManual = "manual"

// The spec is PolicySpec, run as fixtures/expect.yaml's manual row says.
var _ = register(policyClaim(ClaimManual, "Manual routing set at creation"))
