package operator

import (
	"encoding/json"
	"fmt"
)

// ObserverPath is the read-only membership view the operator's router
// patches add (vllm-router 0003, sglang-gateway 0002): GET on the router's
// HTTP port, each router Pod on its own address.
const ObserverPath = "/observer/endpoints"

// ObserverDocument is the JSON body of GET /observer/endpoints.
type ObserverDocument struct {
	Router struct {
		BootGeneration int64 `json:"boot_generation"`
		NowMS          int64 `json:"now_ms"`
	} `json:"router"`
	RegistryRevision int64            `json:"registry_revision"`
	Workers          []ObserverWorker `json:"workers"`
}

// ObserverWorker is one workers[] entry.
type ObserverWorker struct {
	URL       string            `json:"url"`
	Port      int               `json:"port,omitempty"`
	Role      string            `json:"role,omitempty"`
	PodHint   string            `json:"pod_hint,omitempty"`
	WorkerID  string            `json:"worker_id,omitempty"`
	Selection ObserverSelection `json:"selection"`
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
