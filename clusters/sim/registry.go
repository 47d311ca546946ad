package sim

import (
	"github.com/gpustack/routing-conformance/clusters/sim/engine/vllm"
	"github.com/gpustack/routing-conformance/clusters/sim/router/vllmrouter"
)

// DefaultPrograms is the registry of the real emulators built into the sim:
// vllm-router (clusters/sim/router/vllmrouter) and `vllm serve`
// (clusters/sim/engine/vllm). The others are wired here as they land
// (clusters/sim/router/sglanggateway, clusters/sim/engine/sglang); until
// then their pairs are reported unsupported with the missing program named.
func DefaultPrograms() Programs {
	return Programs{
		VLLMRouter: vllmrouter.Main,
		VLLM:       vllm.Main,
	}
}
