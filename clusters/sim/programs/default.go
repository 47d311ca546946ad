package programs

import (
	"github.com/gpustack/routing-conformance/clusters/sim/engine/sglang"
	"github.com/gpustack/routing-conformance/clusters/sim/engine/vllm"
	"github.com/gpustack/routing-conformance/clusters/sim/router/sglanggateway"
	"github.com/gpustack/routing-conformance/clusters/sim/router/vllmrouter"
)

// Default is the registry of the real emulators built into the sim:
// the operator renders a program name, the sim runs the matching proc.Main.
//
//	vllm-router                        clusters/sim/router/vllmrouter
//	sgl-model-gateway                  clusters/sim/router/sglanggateway
//	vllm (serve ...)                   clusters/sim/engine/vllm
//	python3 -m sglang.launch_server    clusters/sim/engine/sglang
func Default() Registry {
	return Registry{
		VLLMRouter:    vllmrouter.Main,
		SGLangGateway: sglanggateway.Main,
		VLLM:          vllm.Main,
		SGLang:        sglang.Main,
	}
}
