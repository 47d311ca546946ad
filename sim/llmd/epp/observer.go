package epp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
)

// ObserverPath is the read-only membership view gpustack-operator patches
// onto the EPP's metrics server (:9090), read by the operator's status.
// gpustack/gpustack-operator@c7f9e7cd:pack/llm-router/patches/llm-d/0001-observer-endpoints-and-dispatch.patch
// (pkg/epp/observer/endpoints.go: Path, freshness, the JSON shape).
const ObserverPath = "/observer/endpoints"

// observerFreshness is how long a dispatched endpoint stays in the view.
const observerFreshness = 15 * time.Second

// observerPluginTypes are the plugin types the patch covers
// (SupportedPlugins); any other type makes the view answer 503.
var observerPluginTypes = map[string]bool{
	"label-selector-filter": true, "queue-scorer": true, "kv-cache-utilization-scorer": true,
	"max-score-picker": true, "prefix-cache-scorer": true, "metrics-data-source": true,
	"core-metrics-extractor": true, "approx-prefix-cache-producer": true,
	"precise-prefix-cache-producer": true, "token-producer": true, "endpoint-notification-source": true,
	"prefix-based-pd-decider": true, "disagg-profile-handler": true, "single-profile-handler": true,
	"openai-parser": true, "anthropic-parser": true, "vllmhttp-parser": true,
	"fcfs-ordering-policy": true, "global-strict-fairness-policy": true,
	"static-usage-limit-policy-type": true, "utilization-detector": true,
}

type dispatch struct {
	meta *fw.EndpointMetadata
	at   time.Time
}

// observer shares the selection-to-send window with the view: while any
// request is between scheduling and its request-phase reply, the view
// answers 503; endpoints dispatched to in the last 15 s stay listed.
type observer struct {
	mu        sync.Mutex
	ds        *datalayer.Datastore
	supported bool
	now       func() time.Time
	boot      uint64
	epoch     uint64
	active    uint64
	recent    map[string]dispatch
}

func newObserver(ds *datalayer.Datastore, pluginTypes []string) *observer {
	supported := len(pluginTypes) > 0
	for _, t := range pluginTypes {
		supported = supported && observerPluginTypes[t]
	}
	return &observer{ds: ds, supported: supported, now: time.Now, boot: uint64(time.Now().UnixNano()), recent: map[string]dispatch{}}
}

type window struct {
	o        *observer
	targets  map[string]*fw.EndpointMetadata
	finished bool
}

func (o *observer) begin() *window {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.active++
	o.epoch++
	return &window{o: o, targets: map[string]*fw.EndpointMetadata{}}
}

func endpointKey(m *fw.EndpointMetadata) string { return m.ID() + "|" + m.Address + "|" + m.Port }

func (w *window) record(m *fw.EndpointMetadata) {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	if !w.finished {
		w.targets[endpointKey(m)] = m
	}
}

func (w *window) finish() {
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if w.finished {
		return
	}
	w.finished = true
	now := o.now()
	for k, d := range o.recent {
		if now.Sub(d.at) >= observerFreshness {
			delete(o.recent, k)
		}
	}
	for k, m := range w.targets {
		o.recent[k] = dispatch{meta: m, at: now}
	}
	o.active--
	o.epoch++
}

// ObserverWorker is one workers[] entry of the view (port is a string).
type ObserverWorker struct {
	URL       string `json:"url"`
	Port      string `json:"port"`
	Role      string `json:"role"`
	PodHint   string `json:"pod_hint"`
	WorkerID  string `json:"worker_id"`
	Selection struct {
		Registered  bool `json:"registered"`
		Healthy     bool `json:"healthy"`
		CircuitOpen bool `json:"circuit_open"`
		InSelection bool `json:"in_selection"`
	} `json:"selection"`
	LastJob *struct {
		Recent bool `json:"recent_dispatch"`
	} `json:"last_job,omitempty"`
}

// ObserverView is the document.
type ObserverView struct {
	Router struct {
		Boot uint64 `json:"boot_generation"`
		Now  uint64 `json:"now_ms"`
	} `json:"router"`
	Revision uint64           `json:"registry_revision"`
	Workers  []ObserverWorker `json:"workers"`
}

func observedWorker(m *fw.EndpointMetadata, registered, recent bool) (ObserverWorker, error) {
	port, err := strconv.Atoi(m.Port)
	role := m.Labels["app.kubernetes.io/component"]
	if err != nil || port < 1 || port > 65535 || net.ParseIP(m.Address) == nil || m.PodName == "" || m.Name == "" || role == "" {
		return ObserverWorker{}, errors.New("endpoint identity or listener is incomplete")
	}
	w := ObserverWorker{URL: "http://" + net.JoinHostPort(m.Address, m.Port), Port: m.Port, Role: role,
		PodHint: m.PodName, WorkerID: m.ID()}
	w.Selection.Registered, w.Selection.Healthy, w.Selection.InSelection = registered, registered, registered
	if recent {
		w.LastJob = &struct {
			Recent bool `json:"recent_dispatch"`
		}{true}
	}
	return w, nil
}

func (o *observer) snapshot() (ObserverView, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.supported {
		return ObserverView{}, errors.New("native routing profile is not covered")
	}
	if o.active != 0 {
		return ObserverView{}, errors.New("native endpoint selection or send is pending")
	}
	now := o.now()
	rows := map[string]ObserverWorker{}
	for _, e := range o.ds.List() {
		w, err := observedWorker(e.Meta, true, false)
		if err != nil {
			return ObserverView{}, err
		}
		rows[endpointKey(e.Meta)] = w
	}
	for k, d := range o.recent {
		if now.Before(d.at) || now.Sub(d.at) < observerFreshness {
			row, err := observedWorker(d.meta, false, true)
			if err != nil {
				return ObserverView{}, err
			}
			if prior, ok := rows[k]; ok {
				prior.LastJob = row.LastJob
				row = prior
			}
			rows[k] = row
		}
	}
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	v := ObserverView{Revision: o.ds.Revision() + o.epoch, Workers: make([]ObserverWorker, 0, len(rows))}
	v.Router.Boot = o.boot
	v.Router.Now = uint64(now.UnixMilli())
	for _, k := range keys {
		v.Workers = append(v.Workers, rows[k])
	}
	return v, nil
}

// ServeHTTP answers GET with the view or 503 with the reason.
func (o *observer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	v, err := o.snapshot()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("failed to encode membership: %v", err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
