// A spec package reaching into the sim past the adapter.
package suites

import "github.com/gpustack/routing-conformance/sim/engine"

func Run() bool { return engine.Serve() }
