// An emulator that knows the suite's target seam: sim/ importing clusters/.
package engine

import (
	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

func Serve() bool { return clusters.Ready() && api.Kind != "" }
