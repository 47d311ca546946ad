package programs

import (
	"io/fs"
	"net/http"

	"github.com/gpustack/routing-conformance/sim/engine/sglang"
	"github.com/gpustack/routing-conformance/sim/engine/vllm"
	"github.com/gpustack/routing-conformance/sim/llmd/envoy"
	"github.com/gpustack/routing-conformance/sim/llmd/epp"
	"github.com/gpustack/routing-conformance/sim/llmd/prefixcache"
	"github.com/gpustack/routing-conformance/sim/llmd/sidecar"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// Default is the registry of the emulators built into the sim, with no
// cluster around them (New's zero Deps). vllm-router and sgl-model-gateway
// are not among them: they run as their binaries built from source
// (sim/upstream), which the sim target adds.
//
//	epp, envoy (llm-d-router)          sim/llmd/{epp,envoy}
//	/app/pd-sidecar (routing-proxy)    sim/llmd/sidecar
//	vllm (serve ...)                   sim/engine/vllm
//	python3 -m sglang.launch_server    sim/engine/sglang
func Default() Registry { return New(Deps{}) }

// Deps is what the programs that talk to each other outside HTTP need from
// the cluster that runs them.
type Deps struct {
	// HTTPClient is the EPP's client for engine metrics and the tokenizer
	// Service's /render; it must resolve Service names. Nil: epp's default.
	HTTPClient *http.Client
	// PickerSeed seeds every EPP's random tie-break; 0 seeds from the
	// clock as the EPP does.
	PickerSeed uint64
	// EPPStarted is told each EPP's start (its seed among others).
	EPPStarted func(epp.StartInfo)
}

// New is the registry with deps wired into the programs that need them.
func New(d Deps) Registry {
	r := Registry{
		VLLM:   vllm.Main,
		SGLang: sglang.Main,
		EPP: epp.Main(epp.Deps{Files: mounted, KVEvents: prefixcache.ZMQSource{}, HTTPClient: d.HTTPClient,
			Seed: d.PickerSeed, Started: d.EPPStarted}),
		Envoy:        envoy.Main(envoy.Deps{Files: mounted}),
		RoutingProxy: sidecar.Main(),
	}
	return r
}

// mounted is the container's volumes as the kubelet mounted them.
func mounted(c *proc.Container) fs.FS { return c.Files }
