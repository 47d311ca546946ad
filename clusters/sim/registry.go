package sim

import (
	"github.com/gpustack/routing-conformance/clusters/sim/engine/vllm"
	"github.com/gpustack/routing-conformance/clusters/sim/router/sglanggateway"
	"github.com/gpustack/routing-conformance/clusters/sim/router/vllmrouter"
)

// DefaultPrograms is the registry of the real emulators built into the sim:
// vllm-router (clusters/sim/router/vllmrouter), sgl-model-gateway
// (clusters/sim/router/sglanggateway) and `vllm serve`
// (clusters/sim/engine/vllm). `python3 -m sglang.launch_server`
// (clusters/sim/engine/sglang) is wired here when it lands; until then the
// SGLang pairs are reported unsupported with the missing program named.
func DefaultPrograms() Programs {
	return Programs{
		VLLMRouter:    vllmrouter.Main,
		SGLangGateway: sglanggateway.Main,
		VLLM:          vllm.Main,
	}
}
