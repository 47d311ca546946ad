// Package datalayer is the EPP's endpoint datastore and metrics collection:
// endpoint discovery by label selector over a Pod source (the pod
// reconciler in endpoint-selector mode), one endpoint per target port named
// "<pod>-rank-<i>", one collector per endpoint scraping the engine's
// /metrics every --refresh-metrics-interval, and the pool-gauge refresher
// whose freshness rule is --metrics-staleness-threshold.
//
// Sources (llm-d/llm-d-router@71f4f099): pkg/epp/controller/pod_reconciler.go,
// pkg/epp/datastore/datastore.go, pkg/epp/datalayer/{collector.go,logger/logger.go},
// framework/plugins/datalayer/{source/metrics,source/http,extractor/metrics}.
//
// Staleness, as the EPP has it: a stale endpoint stays a candidate and is
// scored with the last metrics it reported. The threshold only decides
// which endpoints count in llm_d_epp_ready_endpoints and the pool averages
// (refreshPrometheusMetrics), and a failed scrape leaves the metrics as
// they were (the extractor updates only on success).
package datalayer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
)

// Pod is what discovery reads of a Pod.
type Pod struct {
	Name        string
	Namespace   string
	IP          string
	Labels      map[string]string
	Annotations map[string]string
	// Ready is the Pod's Ready condition; Deleting is a set deletionTimestamp.
	Ready    bool
	Deleting bool
}

// PodSource is the Kubernetes API as the EPP's pod reconciler sees it. The
// sim's kubelet satisfies it through an adapter; tests use a fake.
type PodSource interface {
	// Pods lists the Pods of a namespace.
	Pods(namespace string) []Pod
	// Watch signals after Pod changes (coalesced; re-list on receipt).
	Watch() (<-chan struct{}, func())
}

// Pool is the endpoint pool built from the flags in endpoint-selector mode.
type Pool struct {
	Namespace   string
	Name        string
	Selector    labels.Selector
	TargetPorts []int
}

// The active-ports annotations (datastore.go extractActivePorts).
const (
	activePortsAnnotation       = "llm-d.ai/active-ports"
	legacyActivePortsAnnotation = "inference.networking.k8s.io/active-ports"
)

// Endpoint is a live datastore entry.
type Endpoint struct {
	Meta    *framework.EndpointMetadata
	metrics atomic.Pointer[framework.Metrics]
}

// Metrics returns the last extracted metrics.
func (e *Endpoint) Metrics() framework.Metrics {
	if m := e.metrics.Load(); m != nil {
		return *m
	}
	return framework.Metrics{}
}

// SetMetrics replaces the metrics (the extractor's UpdateMetrics).
func (e *Endpoint) SetMetrics(m framework.Metrics) { e.metrics.Store(&m) }

// Hooks react to membership changes (collector start/stop, KV-event
// subscriptions).
type Hooks interface {
	Added(e *Endpoint)
	Removed(e *Endpoint)
}

// Datastore holds the pool's endpoints.
type Datastore struct {
	pool Pool
	log  zaplog.Logger

	mu        sync.RWMutex
	endpoints map[string]*Endpoint
	revision  uint64
	hooks     []Hooks
}

// NewDatastore returns an empty datastore for pool.
func NewDatastore(pool Pool, log zaplog.Logger) *Datastore {
	return &Datastore{pool: pool, log: log, endpoints: map[string]*Endpoint{}}
}

// Pool returns the pool.
func (d *Datastore) Pool() Pool { return d.pool }

// AddHooks registers membership hooks (before Sync runs).
func (d *Datastore) AddHooks(h Hooks) {
	d.mu.Lock()
	d.hooks = append(d.hooks, h)
	d.mu.Unlock()
}

// List returns the endpoints sorted by ID (the source ranges over a
// sync.Map; a fixed order keeps seeded runs reproducible).
func (d *Datastore) List() []*Endpoint {
	d.mu.RLock()
	out := make([]*Endpoint, 0, len(d.endpoints))
	for _, e := range d.endpoints {
		out = append(out, e)
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Endpoint) int { return strings.Compare(a.Meta.ID(), b.Meta.ID()) })
	return out
}

// Revision increases on every membership change.
func (d *Datastore) Revision() uint64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.revision
}

// Sync reconciles the datastore with pods: a Pod is an endpoint source when
// it matches the selector, is Ready and not being deleted; each active
// target port becomes an endpoint (PodReconciler.updateDatastore,
// podUpdateOrAddIfNotExist).
func (d *Datastore) Sync(pods []Pod) {
	want := map[string]*framework.EndpointMetadata{}
	var added []string
	for _, p := range pods {
		if p.Namespace != d.pool.Namespace || p.Deleting || !p.Ready || p.IP == "" ||
			d.pool.Selector == nil || !d.pool.Selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		active := activePorts(p.Annotations, d.pool.TargetPorts)
		for idx, port := range d.pool.TargetPorts {
			if !active[port] {
				continue
			}
			m := &framework.EndpointMetadata{
				Namespace: p.Namespace, Name: p.Name + "-rank-" + strconv.Itoa(idx), PodName: p.Name,
				Address: p.IP, Port: strconv.Itoa(port), Labels: maps.Clone(p.Labels),
				MetricsHost: p.IP + ":" + strconv.Itoa(port),
			}
			want[m.ID()] = m
		}
	}
	d.mu.Lock()
	var gone, fresh []*Endpoint
	for id, e := range d.endpoints {
		if w, ok := want[id]; !ok || w.Address != e.Meta.Address || w.Port != e.Meta.Port || !maps.Equal(w.Labels, e.Meta.Labels) {
			gone = append(gone, e)
			delete(d.endpoints, id)
		}
	}
	for id, m := range want {
		if _, ok := d.endpoints[id]; ok {
			continue
		}
		e := &Endpoint{Meta: m}
		d.endpoints[id] = e
		fresh = append(fresh, e)
		if !slices.Contains(added, m.PodName) {
			added = append(added, m.PodName)
		}
	}
	if len(gone)+len(fresh) > 0 {
		d.revision++
	}
	hooks := slices.Clone(d.hooks)
	d.mu.Unlock()
	for _, e := range gone {
		for _, h := range hooks {
			h.Removed(e)
		}
	}
	slices.Sort(added)
	for _, name := range added {
		d.log.V(zaplog.Default).Info("datastore/datastore.go:372", "Pod added", "name", name)
	}
	for _, e := range fresh {
		for _, h := range hooks {
			h.Added(e)
		}
	}
}

// Run keeps the datastore in sync with src until ctx ends.
func (d *Datastore) Run(ctx context.Context, src PodSource) {
	ch, cancel := src.Watch()
	defer cancel()
	d.Sync(src.Pods(d.pool.Namespace))
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			d.Sync(src.Pods(d.pool.Namespace))
		}
	}
}

// activePorts reads llm-d.ai/active-ports (or the legacy GIE key); without
// it every target port is active.
func activePorts(ann map[string]string, target []int) map[int]bool {
	out := map[int]bool{}
	v, ok := ann[activePortsAnnotation]
	if !ok {
		v, ok = ann[legacyActivePortsAnnotation]
	}
	for _, p := range target {
		out[p] = !ok
	}
	if !ok {
		return out
	}
	for _, s := range strings.Split(v, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(s), "%d", &n); err == nil && n > 0 && slices.Contains(target, n) {
			out[n] = true
		}
	}
	return out
}
