package routerbase

import (
	"context"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
)

// RunHealthChecks runs the periodic health checks over reg in g, setting
// health (1 healthy, 0 not) on every flip.
func RunHealthChecks(g *Group, reg *workers.Registry, cfg workers.HealthConfig, client *http.Client, health *prometheus.GaugeVec) {
	g.Go(func(ctx context.Context) {
		workers.RunHealthChecks(ctx, reg, cfg, client, func(w *workers.Worker, healthy bool) {
			v := 0.0
			if healthy {
				v = 1
			}
			health.WithLabelValues(w.URL()).Set(v)
		})
	})
}

// CircuitSeries are a router's circuit-breaker series and when it sets
// them: their names and a few update rules differ per router.
type CircuitSeries struct {
	// State is 0 closed, 1 open, 2 half-open, per worker.
	State *prometheus.GaugeVec
	// Transitions is labelled worker, from, to.
	Transitions *prometheus.CounterVec
	// Outcomes is labelled worker, outcome (success/failure).
	Outcomes *prometheus.CounterVec
	// StateEveryOutcome sets State after every outcome, not only on a
	// transition (VR's Worker::record_outcome ends in set_cb_state;
	// vllm-project/router@v0.1.15:src/core/worker.rs): the series exists
	// once a worker has served.
	StateEveryOutcome bool
	// ConsecutiveFailures and ConsecutiveSuccesses, when set, are the
	// breaker's counts after every outcome and transition (SG's
	// publish_gauge_metrics; sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/core/circuit_breaker.rs).
	ConsecutiveFailures, ConsecutiveSuccesses *prometheus.GaugeVec
}

// Record feeds w's breaker one outcome (ok is whatever the router counts as
// a success) and updates the series; a transition bumps reg's revision.
func (s CircuitSeries) Record(reg *workers.Registry, w *workers.Worker, ok bool) {
	from, to, changed := w.RecordOutcome(ok)
	outcome := "failure"
	if ok {
		outcome = "success"
	}
	s.Outcomes.WithLabelValues(w.URL(), outcome).Inc()
	if changed {
		s.Transitions.WithLabelValues(w.URL(), from.String(), to.String()).Inc()
		reg.Bump()
	}
	if changed || s.StateEveryOutcome {
		s.State.WithLabelValues(w.URL()).Set(float64(to))
	}
	if s.ConsecutiveFailures != nil {
		f, ok := w.Consecutive()
		s.ConsecutiveFailures.WithLabelValues(w.URL()).Set(float64(f))
		s.ConsecutiveSuccesses.WithLabelValues(w.URL()).Set(float64(ok))
	}
}

// Pending are the discovered workers waiting for their health gate.
type Pending struct {
	mu sync.Mutex
	m  map[string]discovery.Target
}

// Track records t as pending until the returned func is called.
func (p *Pending) Track(t discovery.Target) (done func()) {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]discovery.Target{}
	}
	p.m[t.URL] = t
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.m, t.URL)
		p.mu.Unlock()
	}
}

// Observe returns the builder of the operator's /observer/endpoints view:
// reg's workers in candidate order, then the pending ones not registered.
func (p *Pending) Observe(reg *workers.Registry) func() (uint64, []ObserverWorker) {
	return func() (uint64, []ObserverWorker) {
		var out []ObserverWorker
		for _, wk := range reg.All() {
			open := wk.CircuitOpen()
			out = append(out, ObserverWorker{
				URL: wk.URL(), Port: wk.Port(), Role: string(wk.Role()), PodHint: wk.PodName, WorkerID: wk.ID,
				Selection: ObserverSelection{Registered: true, Healthy: wk.Healthy(), CircuitOpen: open, InSelection: wk.Healthy() && !open},
			})
		}
		p.mu.Lock()
		for _, t := range p.m {
			if reg.Get(t.URL) != nil {
				continue
			}
			out = append(out, ObserverWorker{URL: t.URL, Port: t.Port, Role: string(t.Role), PodHint: t.Pod.Name})
		}
		p.mu.Unlock()
		return reg.Revision(), out
	}
}
