package config

import (
	"time"

	"github.com/gpustack/routing-conformance/api"
)

// Default returns the built-in configuration that e2e.yaml is laid over:
// the sim target, two replicas, 120 serial requests, a 500-character shared
// prefix and every default/<op> interval, so no lookup falls back silently.
// The values are the documented ones (docs/operator.md, docs/routers.md).
func Default() *Config {
	iv := func(timeout, poll time.Duration) Interval {
		return Interval{Timeout: Duration(timeout), Poll: Duration(poll)}
	}
	return &Config{
		Target: TargetSim,
		Model:  Model{Name: "Qwen/Qwen2.5-0.5B-Instruct", ContextLength: 4096},
		Engines: []Engine{
			{Name: api.EngineVLLM, Version: "0.29.0", Image: "gpustack/runner:cuda12.9-vllm0.29.0"},
			{Name: api.EngineSGLang, Version: "0.5.18"},
		},
		Routers:  []Router{{Name: api.RouterVLLM}, {Name: api.RouterSGLang}, {Name: api.RouterLLMD}},
		Replicas: 2,
		Traffic: Traffic{
			Requests:       120,
			Concurrency:    []int{2, 4, 8, 16},
			PrefixChars:    500,
			MaxTokens:      16,
			RequestTimeout: Duration(2 * time.Minute),
		},
		// A real cluster: engines may take 30 minutes to start (startup
		// probe threshold 180 x 10 s, docs/operator.md#engine-probes).
		Intervals: map[string]Interval{
			SpecDefault + "/" + OpWaitReady:       iv(30*time.Minute, 10*time.Second),
			SpecDefault + "/" + OpWaitRouterCrash: iv(5*time.Minute, 2*time.Second),
			SpecDefault + "/" + OpWaitLogs:        iv(2*time.Minute, 2*time.Second),
			SpecDefault + "/" + OpWaitMetrics:     iv(2*time.Minute, 2*time.Second),
			SpecDefault + "/" + OpWaitDeleted:     iv(5*time.Minute, 2*time.Second),
			SpecDefault + "/" + OpConsistently:    iv(30*time.Second, 2*time.Second),
			SpecDefault + "/" + OpTraffic:         iv(30*time.Minute, time.Second),
			SpecDefault + "/" + OpFaultWindow:     iv(30*time.Second, time.Second),
			SpecDefault + "/" + OpRecover:         iv(30*time.Minute, 2*time.Second),
		},
		CostModel:        defaultCostModel(),
		Artifacts:        "artifacts",
		CollectArtifacts: CollectOnFailure,
		Sim: Sim{
			Intervals: map[string]Interval{
				SpecDefault + "/" + OpWaitReady:       iv(30*time.Second, 20*time.Millisecond),
				SpecDefault + "/" + OpWaitRouterCrash: iv(15*time.Second, 20*time.Millisecond),
				SpecDefault + "/" + OpWaitLogs:        iv(10*time.Second, 20*time.Millisecond),
				SpecDefault + "/" + OpWaitMetrics:     iv(10*time.Second, 20*time.Millisecond),
				SpecDefault + "/" + OpWaitDeleted:     iv(15*time.Second, 20*time.Millisecond),
				SpecDefault + "/" + OpConsistently:    iv(time.Second, 50*time.Millisecond),
				SpecDefault + "/" + OpTraffic:         iv(60*time.Second, 20*time.Millisecond),
				SpecDefault + "/" + OpFaultWindow:     iv(time.Second, 20*time.Millisecond),
				SpecDefault + "/" + OpRecover:         iv(15*time.Second, 20*time.Millisecond),
			},
			EngineTTFT:         Duration(2 * time.Millisecond),
			EngineITL:          Duration(200 * time.Microsecond),
			EngineOutputTokens: 16,
			LLMD:               SimLLMDEmulated,
		},
		Kube: Kube{NamespacePrefix: "rc-", OperatorNamespace: "gpustack-system"},
		Kind: Kind{ClusterName: "routing-conformance"},
	}
}
