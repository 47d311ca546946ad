// A target that decides pass or fail itself: clusters/ importing assertions/.
package clusters

import (
	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
)

func Ready() bool { return assertions.Holds() && api.Kind != "" }
