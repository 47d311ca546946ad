package routerbase

// The read-only endpoint view gpustack-operator patches into both argv routers
// (GET /observer/endpoints on the serving port; docs/operator.md#finding-things-in-a-cluster): the
// router's boot, the registry revision, and every worker with whether it is in
// the selection set. The operator reads it to compute
// status.roles[].endpoints.serving.

import (
	"encoding/json"
	"net/http"
	"time"
)

// ObserverPath is the route the patch adds.
const ObserverPath = "/observer/endpoints"

// ObserverView is the JSON document.
type ObserverView struct {
	Router           ObserverRouter   `json:"router"`
	RegistryRevision uint64           `json:"registry_revision"`
	Workers          []ObserverWorker `json:"workers"`
}

// ObserverRouter identifies the router process.
type ObserverRouter struct {
	// BootGeneration changes on every router start (unix ms of the boot).
	BootGeneration int64 `json:"boot_generation"`
	// NowMs is the router's clock when the view was taken.
	NowMs int64 `json:"now_ms"`
}

// ObserverWorker is one endpoint the router knows.
type ObserverWorker struct {
	URL       string            `json:"url"`
	Port      int               `json:"port"`
	Role      string            `json:"role"`
	PodHint   string            `json:"pod_hint"`
	WorkerID  string            `json:"worker_id"`
	Selection ObserverSelection `json:"selection"`
}

// ObserverSelection says why a worker is or is not a candidate.
type ObserverSelection struct {
	// Registered is false while the worker waits for its health gate.
	Registered  bool `json:"registered"`
	Healthy     bool `json:"healthy"`
	CircuitOpen bool `json:"circuit_open"`
	InSelection bool `json:"in_selection"`
}

// ObserverHandler serves the view built by build on every request.
func ObserverHandler(boot time.Time, build func() (uint64, []ObserverWorker)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		rev, ws := build()
		if ws == nil {
			ws = []ObserverWorker{}
		}
		v := ObserverView{Router: ObserverRouter{BootGeneration: boot.UnixMilli(), NowMs: time.Now().UnixMilli()}, RegistryRevision: rev, Workers: ws}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}
