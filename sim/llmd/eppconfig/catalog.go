package eppconfig

// Plugin types the emulation instantiates.
const (
	TypeLabelSelectorFilter   = "label-selector-filter"
	TypeDecodeFilter          = "decode-filter"
	TypePrefillFilter         = "prefill-filter"
	TypeEncodeFilter          = "encode-filter"
	TypeQueueScorer           = "queue-scorer"
	TypeKVCacheScorer         = "kv-cache-utilization-scorer"
	TypePrefixCacheScorer     = "prefix-cache-scorer"
	TypeMaxScorePicker        = "max-score-picker"
	TypeRandomPicker          = "random-picker"
	TypeSingleProfileHandler  = "single-profile-handler"
	TypeDisaggProfileHandler  = "disagg-profile-handler"
	TypePrefixBasedPDDecider  = "prefix-based-pd-decider"
	TypeAlwaysDisaggPDDecider = "always-disagg-pd-decider"
	TypeApproxPrefixProducer  = "approx-prefix-cache-producer"
	TypePrecisePrefixProducer = "precise-prefix-cache-producer"
	TypeTokenProducer         = "token-producer"
	TypeMetricsDataSource     = "metrics-data-source"
	TypeMetricsExtractor      = "core-metrics-extractor"
	TypeEndpointNotifications = "endpoint-notification-source"
	TypeOpenAIParser          = "openai-parser"
	TypeAnthropicParser       = "anthropic-parser"
	TypeVLLMHTTPParser        = "vllmhttp-parser"
	TypeFCFSOrdering          = "fcfs-ordering-policy"
	TypeGlobalStrictFairness  = "global-strict-fairness-policy"
	TypeStaticUsageLimit      = "static-usage-limit-policy"
	TypeUtilizationDetector   = "utilization-detector"
)

// Stability is a registered type's maturity.
type Stability int

const (
	// Beta types load freely.
	Beta Stability = iota
	// Alpha types need --allow-experimental-plugins.
	Alpha
)

// Registration is what registerInTreePlugins records for a type.
type Registration struct {
	Stability  Stability
	Deprecated bool
}

// Catalog is every type llm-d-router v0.10.0 registers
// (cmd/epp/runner/runner.go registerInTreePlugins). A type missing here is
// "not registered"; a type here without an emulated factory is refused by
// the sim with a message that says so.
var Catalog = func() map[string]Registration {
	beta := []string{
		TypeLabelSelectorFilter, TypeEncodeFilter, TypeDecodeFilter, TypePrefillFilter,
		"data-parallel-profile-handler", "load-aware-scorer", "context-length-aware",
		"models-data-source", "models-data-extractor", TypePrefixCacheScorer, TypeMaxScorePicker,
		TypeRandomPicker, "weighted-random-picker", TypeSingleProfileHandler, TypeDisaggProfileHandler,
		TypeAlwaysDisaggPDDecider, TypePrefixBasedPDDecider, "always-disagg-multimodal-decider",
		TypeKVCacheScorer, TypeQueueScorer, "running-requests-size-scorer", "lora-affinity-scorer",
		"token-load-scorer", "no-hit-lru-scorer", "active-request-scorer", "precise-prefix-cache-scorer",
		"mm-embeddings-cache-scorer", TypePrecisePrefixProducer, TypeGlobalStrictFairness,
		"round-robin-fairness-policy", "program-aware-fairness", TypeFCFSOrdering, "edf-ordering-policy",
		"slo-deadline-ordering-policy", TypeStaticUsageLimit, TypeApproxPrefixProducer,
		"inflight-load-producer", "predicted-latency-producer", "mm-embeddings-cache-producer",
		TypeTokenProducer, "session-id-producer", "latency-slo-admitter", "probabilistic-admitter",
		"prefix-cache-affinity-filter", "slo-headroom-tier-filter", "latency-scorer",
		"header-based-testing-filter", "destination-endpoint-served-verifier", TypeMetricsDataSource,
		TypeMetricsExtractor, "k8s-notification-source", TypeEndpointNotifications,
		"request-attribute-reporter", TypeOpenAIParser, "vllmgrpc-parser", "passthrough-parser",
		TypeAnthropicParser, TypeVLLMHTTPParser, "vertexai-parser", "concurrency-detector",
		TypeUtilizationDetector, "file-discovery",
	}
	alpha := []string{
		"disaggregatedset-rollout-screener", "session-affinity-filter", "endpoint-attribute-filter",
		"topology-affinity-filter", "utilization-filter", "session-affinity-scorer",
		"header-label-affinity-scorer", "topology-extractor", "dcgm-data-source", "dcgm-extractor",
		"header-profile-handler", "endpoint-attribute-scorer", "topology-affinity-scorer",
		"burst-prefix-cache-producer", "p2p-source-producer", "multicluster-session-affinity-filter",
		"multicluster-queue-scorer", "multicluster-kv-cache-utilization-scorer",
		"multicluster-prefix-cache-scorer", "multicluster-approx-prefix-cache-producer",
		"sheddable-eviction-filter", "priority-then-time-eviction-order-policy", "priority-holdback-policy",
		"soft-reflective-ceiling-policy", "multicluster-metrics-data-source",
		"multicluster-metrics-extractor", "multicluster-file-discovery", "agent-identity",
	}
	deprecated := []string{"by-label-selector", "by-label", "disagg-headers-handler",
		"prefill-header-handler", "pd-profile-handler", "tokenizer"}
	m := map[string]Registration{}
	for _, t := range beta {
		m[t] = Registration{Stability: Beta}
	}
	for _, t := range alpha {
		m[t] = Registration{Stability: Alpha}
	}
	for _, t := range deprecated {
		m[t] = Registration{Stability: Beta, Deprecated: true}
	}
	return m
}()

// DefaultProducers maps a data key to the producer type the framework
// auto-creates when a consumer needs it and none is configured
// (RegisterAsDefaultProducer).
var DefaultProducers = map[string]string{
	"PrefixCacheMatchInfoDataKey/approx-prefix-cache-producer": TypeApproxPrefixProducer,
	"TokenizedPrompt/token-producer":                           TypeTokenProducer,
}

// Feature gates registered by the runner with their defaults.
var featureGates = map[string]bool{
	"flowControl":                  false,
	"haPopulateNonLeaderDatastore": true,
}
