package engine

// Environment variables a Pod may set to shape the simulated model (the
// "Sim-only knobs" above). They are the contract between the sim target,
// which sets them from its options, and the engine programs, which read them.
const (
	EnvTTFT         = "SIM_ENGINE_TTFT"
	EnvITL          = "SIM_ENGINE_ITL"
	EnvOutputTokens = "SIM_ENGINE_OUTPUT_TOKENS"
	EnvStartupDelay = "SIM_ENGINE_STARTUP_DELAY"
)
