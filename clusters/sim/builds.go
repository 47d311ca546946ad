package sim

import (
	"fmt"

	"github.com/gpustack/routing-conformance/sim/upstream"
)

// Builds names the built binaries a sim runs in place of emulations, so
// the suite asks for them without knowing how the sim finds them.
type Builds struct {
	// Routers: vllm-router and sgl-model-gateway run as the binaries
	// make routers built, read from RoutersDir ("" is make routers'
	// cache).
	Routers    bool
	RoutersDir string
	// LLMD: the llm-d-router pairs' epp container runs llm-d-router's
	// own EPP, built by make upstream-llmd, read from LLMDDir (""
	// is .upstream-llmd in the checkout).
	LLMD    bool
	LLMDDir string
}

// RunsBuiltRouter reports whether the sim runs router as a built binary
// (vllm-router, sglang-gateway) rather than an emulation.
func RunsBuiltRouter(router string) bool { return upstream.Supports(router) }

// Open is New with the builds b names loaded into opts. Its errors say
// which build is missing and the make target that makes it.
func Open(opts Options, b Builds) (*Cluster, error) {
	if b.Routers {
		in, err := upstream.Load(b.RoutersDir)
		if err != nil {
			return nil, fmt.Errorf("the sim runs vllm-router and sglang-gateway as their binaries built from source: %w", err)
		}
		opts.Routers = in
	}
	if b.LLMD {
		in, err := upstream.LoadEPP(b.LLMDDir)
		if err != nil {
			return nil, fmt.Errorf("the llm-d-router pairs are to run llm-d-router's EPP as built (sim.llmd: upstream): %w", err)
		}
		opts.LLMD = in
	}
	return New(opts), nil
}

// RoutersBuilt is nil when make routers' build in dir ("" is its cache)
// can run, else why not.
func RoutersBuilt(dir string) error {
	_, err := upstream.Load(dir)
	return err
}
