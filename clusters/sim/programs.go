package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim/operator"
	"github.com/gpustack/routing-conformance/clusters/sim/proc"
)

// Programs is the sim's "container image": which emulator runs when the
// operator renders a given program. A nil field means the program is not in
// this build; pairs that need it are reported unsupported by Describe and
// refused by Deploy.
type Programs struct {
	// VLLMRouter runs `vllm-router <args>` (router container of vllm-router).
	VLLMRouter proc.Main
	// SGLangGateway runs `sgl-model-gateway <args>` (router container of sglang-gateway).
	SGLangGateway proc.Main
	// VLLM runs `vllm <args>`; args start with `serve <model>`.
	VLLM proc.Main
	// SGLang runs `python3 -m sglang.launch_server <args>`.
	SGLang proc.Main
}

// merge fills p's nil fields from def.
func (p Programs) merge(def Programs) Programs {
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
	return p
}

// router returns the program a router renders to.
func (p Programs) router(name string) (proc.Main, string) {
	switch name {
	case api.RouterVLLM:
		return p.VLLMRouter, operator.BinaryVLLMRouter
	case api.RouterSGLang:
		return p.SGLangGateway, operator.BinarySGLangGateway
	}
	return nil, name
}

// engine returns the program an engine name renders to.
func (p Programs) engine(name string) (proc.Main, string) {
	switch name {
	case api.EngineVLLM:
		return p.VLLM, strings.Join(operator.EngineProgramVLLM, " ")
	case api.EngineSGLang:
		return p.SGLang, strings.Join(operator.EngineProgramSGLang, " ")
	}
	return nil, name
}

// command resolves an argv's program part (a take-over role's command).
func (p Programs) command(program []string) proc.Main {
	switch {
	case slices.Equal(program, operator.EngineProgramVLLM):
		return p.VLLM
	case slices.Equal(program, operator.EngineProgramSGLang):
		return p.SGLang
	case slices.Equal(program, []string{operator.BinaryVLLMRouter}):
		return p.VLLMRouter
	case slices.Equal(program, []string{operator.BinarySGLangGateway}):
		return p.SGLangGateway
	}
	return nil
}

// notFound is what a container whose program is not in the image does: the
// runtime cannot start it (StartError, exit code 128).
func notFound(program []string) proc.Main {
	return func(_ context.Context, c *proc.Container) int {
		fmt.Fprintf(c.Stderr, "exec: %q: executable file not found in $PATH\n", strings.Join(program, " "))
		return 128
	}
}
