package sim

// DefaultPrograms is the registry of the real emulators built into the sim.
// The router and engine emulators are wired here as they land
// (clusters/sim/router/vllmrouter, clusters/sim/router/sglanggateway,
// clusters/sim/engine/vllm, clusters/sim/engine/sglang).
func DefaultPrograms() Programs {
	return Programs{}
}
