package operator

import (
	"fmt"
	"maps"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/api"
)

// EngineMetrics is the llm-d metrics table for an engine
// (pkg/worker/kvcache/router/metrics.go).
type EngineMetrics struct {
	Engine             string
	QueuedRequests     string
	RunningRequests    string
	KVCacheUtilization string
}

// MetricsForEngine returns the metrics table llm-d-router scores an engine by.
func MetricsForEngine(engine string) (EngineMetrics, error) {
	switch engine {
	case api.EngineVLLM:
		return EngineMetrics{"vllm", "vllm:num_requests_waiting", "vllm:num_requests_running",
			"vllm:kv_cache_usage_perc"}, nil
	case api.EngineSGLang:
		return EngineMetrics{"sglang", "sglang:num_queue_reqs", "sglang:num_running_reqs",
			"sglang:token_usage"}, nil
	}
	return EngineMetrics{}, fmt.Errorf("engine %q has no metrics table for router %q", engine, api.RouterLLMD)
}

// DefaultDisaggregationThreshold is nonCachedTokens when the field is unset.
const DefaultDisaggregationThreshold int32 = 8

// RenderEPPConfig renders the EndpointPickerConfig (ConfigMap <md>-router key
// epp.yaml) as router.go renderLLMD does: a label filter and a profile per
// kind present, queue 2, kv-cache 2, prefix-cache 3 except on decode, the
// precise prefix producer on vLLM (KV events), the approximate one otherwise,
// and the P/D decider when both halves exist.
func RenderEPPConfig(md *api.ModelDeployment) (string, error) {
	metrics, err := MetricsForEngine(md.Spec.Engine.Name)
	if err != nil {
		return "", err
	}
	kinds := map[string]bool{}
	var port int32 = api.EngineDefaultPort
	for i := range md.Spec.Roles {
		kinds[UpstreamKind(md.Spec.Roles[i].RoleKind())] = true
		port = ServingPort(&md.Spec.Roles[i])
	}
	var plugins, profiles []any
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		filter := kind + "-pods"
		plugins = append(plugins, map[string]any{
			"name": filter, "type": "label-selector-filter",
			"parameters": map[string]any{"matchLabels": map[string]string{api.LabelRoleKind: kind}},
		})
		refs := []any{
			map[string]any{"pluginRef": filter},
			map[string]any{"pluginRef": "queue-scorer", "weight": 2},
			map[string]any{"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
			map[string]any{"pluginRef": "max-score-picker"},
		}
		if kind != "decode" {
			refs = append(refs, map[string]any{"pluginRef": "prefix-cache-scorer", "weight": 3})
		}
		profiles = append(profiles, map[string]any{"name": kind, "plugins": refs})
	}

	producer := "approx-prefix-cache-producer"
	precise := md.Spec.Engine.Name == api.EngineVLLM
	if precise {
		producer = "precise-prefix-cache-producer"
		selector := llmdEndpointSelector(md)
		if kinds["decode"] {
			selector += "," + api.LabelRoleKind + "!=decode"
		}
		plugins = append(plugins,
			map[string]any{"type": "token-producer", "parameters": map[string]any{
				"modelName": md.Spec.Model.Name,
				"vllm":      map[string]any{"url": RoleEndpoint(md, tokenizerRole(md))},
			}},
			map[string]any{"type": "endpoint-notification-source"},
			map[string]any{"type": producer, "parameters": map[string]any{"kvEventsConfig": map[string]any{
				"topicFilter": "kv@", "concurrency": 4, "engineType": metrics.Engine, "discoverPods": true,
				"podDiscoveryConfig": map[string]any{
					"podLabelSelector": selector, "podNamespace": md.Metadata.Namespace,
					"socketPort": VLLMKVEventsPort, "replaySocketPort": VLLMKVEventsReplayPort,
				},
			}}})
	} else {
		plugins = append(plugins, map[string]any{"type": producer})
	}
	prefixScorer := map[string]any{"type": "prefix-cache-scorer"}
	if precise {
		prefixScorer["parameters"] = map[string]any{"prefixMatchInfoProducerName": producer}
	}
	plugins = append(plugins,
		map[string]any{"type": "queue-scorer"},
		map[string]any{"type": "kv-cache-utilization-scorer"},
		map[string]any{"type": "max-score-picker"},
		prefixScorer,
		map[string]any{"type": "metrics-data-source", "parameters": map[string]any{"port": port}},
		map[string]any{"type": "core-metrics-extractor", "parameters": map[string]any{
			"engineConfigs": []any{map[string]any{
				"name": metrics.Engine, "queuedRequestsSpec": metrics.QueuedRequests,
				"runningRequestsSpec": metrics.RunningRequests, "kvUsageSpec": metrics.KVCacheUtilization,
			}},
		}},
	)
	if kinds["prefill"] && kinds["decode"] {
		threshold := DefaultDisaggregationThreshold
		if t := md.Spec.Router.DisaggregationThresholdTokens; t != nil {
			threshold = *t
		}
		plugins = append(plugins,
			map[string]any{"type": "prefix-based-pd-decider", "parameters": map[string]any{
				"promptTokens": 0, "nonCachedTokens": threshold,
			}},
			map[string]any{"type": "disagg-profile-handler", "parameters": map[string]any{
				"profiles": map[string]string{"prefill": "prefill", "decode": "decode"},
				"deciders": map[string]string{"prefill": "prefix-based-pd-decider"},
			}},
		)
	}
	config := map[string]any{
		"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
		"plugins": plugins, "schedulingProfiles": profiles,
	}
	if precise {
		config["dataLayer"] = map[string]any{"sources": []any{
			map[string]any{"pluginRef": "metrics-data-source",
				"extractors": []any{map[string]any{"pluginRef": "core-metrics-extractor"}}},
			map[string]any{"pluginRef": "endpoint-notification-source",
				"extractors": []any{map[string]any{"pluginRef": producer}}},
		}}
	}
	out, err := yaml.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("render llm-d configuration: %w", err)
	}
	return string(out), nil
}

// tokenizerRole is the first Prefill role by name, else the first Server,
// else the first role (modelDeploymentTokenizerRole).
func tokenizerRole(md *api.ModelDeployment) *api.Role {
	roles := slices.Clone(md.Spec.Roles)
	slices.SortFunc(roles, func(a, b api.Role) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for _, want := range []string{api.RoleKindPrefill, api.RoleKindServer} {
		for i := range roles {
			if roles[i].RoleKind() == want {
				return &roles[i]
			}
		}
	}
	if len(roles) == 0 {
		return &api.Role{}
	}
	return &roles[0]
}
