package llmdtest

import (
	"strings"

	"github.com/gpustack/routing-conformance/sim/operator"
)

// EnvoyYAML is the operator's envoy.yaml (operator.RenderEnvoyConfig) with
// the route timeout set to timeout seconds, which may be fractional here so
// that tests can make it short.
func EnvoyYAML(timeout string) string {
	return strings.Replace(operator.RenderEnvoyConfig(nil), "timeout: 86400s}", "timeout: "+timeout+"s}", 1)
}
