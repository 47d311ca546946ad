package operator

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gpustack/routing-conformance/api"
)

// ObserverPath is the read-only membership view the operator's router
// patches add (vllm-router 0003, sglang-gateway 0002, llm-d 0001), read on
// each router Pod's own address.
const ObserverPath = "/observer/endpoints"

// ObserverPort is where a router serves the view: llm-d-router on the EPP's
// metrics listener (9090), where its patch registers it beside /metrics; the
// argv routers on their request port (8081)
// (gpustack/gpustack-operator@a7c4446a3b808b97d0bd61dcdb33022012f72d5c:
// pkg/worker/controllers/worker/model_deployment_router_observation.go,
// modelDeploymentRouterObserverPort).
func ObserverPort(router string) int {
	if router == api.RouterLLMD {
		return api.RouterMetricsPort
	}
	return api.RouterHTTPPort
}

// ObserverDocument is the JSON body of GET /observer/endpoints.
type ObserverDocument struct {
	Router struct {
		BootGeneration int64 `json:"boot_generation"`
		NowMS          int64 `json:"now_ms"`
	} `json:"router"`
	RegistryRevision int64            `json:"registry_revision"`
	Workers          []ObserverWorker `json:"workers"`
}

// ObserverWorker is one workers[] entry. The operator declares port a
// string (RouterObservedWorker, @a7c4446a); llm-d's observer writes one
// ("8000"). The sim's argv routers write a number, which ObserverPortValue
// also takes.
type ObserverWorker struct {
	URL       string            `json:"url"`
	Port      ObserverPortValue `json:"port,omitempty"`
	Role      string            `json:"role,omitempty"`
	PodHint   string            `json:"pod_hint,omitempty"`
	WorkerID  string            `json:"worker_id,omitempty"`
	Selection ObserverSelection `json:"selection"`
}

// ObserverPortValue is a port written as a JSON string or number.
type ObserverPortValue string

// UnmarshalJSON takes "8000" or 8000.
func (p *ObserverPortValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = ObserverPortValue(s)
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("port %s is neither a string nor a number", b)
	}
	*p = ObserverPortValue(strconv.Itoa(n))
	return nil
}

// ObserverSelection says whether a worker is a routing candidate.
type ObserverSelection struct {
	Registered  bool `json:"registered"`
	Healthy     bool `json:"healthy"`
	CircuitOpen bool `json:"circuit_open"`
	InSelection bool `json:"in_selection"`
}

// ParseObserver decodes an observer body into the workers ComputeStatus reads.
func ParseObserver(body []byte) ([]ObservedWorker, error) {
	var doc ObserverDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ObserverPath, err)
	}
	out := make([]ObservedWorker, 0, len(doc.Workers))
	for _, w := range doc.Workers {
		out = append(out, ObservedWorker{URL: w.URL, Role: w.Role, PodHint: w.PodHint,
			InSelection: w.Selection.InSelection})
	}
	return out, nil
}
