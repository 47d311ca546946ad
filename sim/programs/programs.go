// Package programs is the sim's "container image": which emulator (a
// proc.Main) runs when the operator renders a given program. The sim target
// runs its Pods from it; any other harness that runs the operator's rendered
// Pods on the sim's kubelet can use it the same way.
package programs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// Registry says which emulator runs when the operator renders a given
// program. A nil field means the program is not in this build; the sim
// target reports pairs that need it unsupported and refuses to deploy them.
type Registry struct {
	// VLLMRouter runs `vllm-router <args>` (router container of vllm-router).
	VLLMRouter proc.Main
	// SGLangGateway runs `sgl-model-gateway <args>` (router container of sglang-gateway).
	SGLangGateway proc.Main
	// VLLM runs `vllm <args>`; args start with `serve <model>`.
	VLLM proc.Main
	// SGLang runs `python3 -m sglang.launch_server <args>`.
	SGLang proc.Main
	// EPP runs `epp <args>` (epp container of llm-d-router).
	EPP proc.Main
	// Envoy runs the proxy image's `envoy <args>` (envoy container of
	// llm-d-router).
	Envoy proc.Main
	// RoutingProxy runs llm-d's pd-sidecar (routing-proxy container of a
	// decode Pod under llm-d-router).
	RoutingProxy proc.Main
}

// Merge fills p's nil fields from def.
func (p Registry) Merge(def Registry) Registry {
	if p.VLLMRouter == nil {
		p.VLLMRouter = def.VLLMRouter
	}
	if p.SGLangGateway == nil {
		p.SGLangGateway = def.SGLangGateway
	}
	if p.VLLM == nil {
		p.VLLM = def.VLLM
	}
	if p.SGLang == nil {
		p.SGLang = def.SGLang
	}
	if p.EPP == nil {
		p.EPP = def.EPP
	}
	if p.Envoy == nil {
		p.Envoy = def.Envoy
	}
	if p.RoutingProxy == nil {
		p.RoutingProxy = def.RoutingProxy
	}
	return p
}

// Router returns the program a router renders to.
func (p Registry) Router(name string) (proc.Main, string) {
	switch name {
	case api.RouterVLLM:
		return p.VLLMRouter, operator.BinaryVLLMRouter
	case api.RouterSGLang:
		return p.SGLangGateway, operator.BinarySGLangGateway
	case api.RouterLLMD:
		if p.Envoy == nil {
			return nil, strings.Join(operator.ProgramEnvoy, " ")
		}
		return p.EPP, operator.BinaryEPP
	}
	return nil, name
}

// Engine returns the program an engine name renders to.
func (p Registry) Engine(name string) (proc.Main, string) {
	switch name {
	case api.EngineVLLM:
		return p.VLLM, strings.Join(operator.EngineProgramVLLM, " ")
	case api.EngineSGLang:
		return p.SGLang, strings.Join(operator.EngineProgramSGLang, " ")
	}
	return nil, name
}

// Command resolves an argv's program part (a take-over role's command).
func (p Registry) Command(program []string) proc.Main {
	switch {
	case slices.Equal(program, operator.EngineProgramVLLM):
		return p.VLLM
	case slices.Equal(program, operator.EngineProgramSGLang):
		return p.SGLang
	case slices.Equal(program, []string{operator.BinaryVLLMRouter}):
		return p.VLLMRouter
	case slices.Equal(program, []string{operator.BinarySGLangGateway}):
		return p.SGLangGateway
	case slices.Equal(program, []string{operator.BinaryEPP}):
		return p.EPP
	case slices.Equal(program, operator.ProgramEnvoy):
		return p.Envoy
	case slices.Equal(program, operator.ProgramRoutingProxy):
		return p.RoutingProxy
	}
	return nil
}

// NotFound is what a container whose program is not in the image does: the
// runtime cannot start it (StartError, exit code 128).
func NotFound(program []string) proc.Main {
	return func(_ context.Context, c *proc.Container) int {
		fmt.Fprintf(c.Stderr, "exec: %q: executable file not found in $PATH\n", strings.Join(program, " "))
		return 128
	}
}
