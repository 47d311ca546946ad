// Package workers is the routers' worker registry: the workers discovered and
// admitted, their health, circuit breaker and in-flight load, in the
// candidate order each router uses (docs/routers.md#candidates-order-and-load).
package workers

import (
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// Role is a worker's kind in the pool.
type Role string

const (
	Regular Role = "regular"
	Prefill Role = "prefill"
	Decode  Role = "decode"
)

// Worker is one engine endpoint the router may select. It implements the
// routing-core policy.Worker interface (URL, Healthy, Load).
type Worker struct {
	url  string
	port int
	role Role
	// PodName and PodUID identify the Pod it was discovered from.
	PodName, PodUID string
	// ModelID is the model id the router keys the worker by (SG IGW: the
	// served model name; VR: "").
	ModelID string
	// BootstrapPort is the PD prefill bootstrap port (annotation), if any.
	BootstrapPort *int
	// ID is the registry's id for the worker (a random UUID, as both
	// routers' registries use).
	ID string

	rank uint64 // VR candidate-order key
	seq  uint64 // registration order

	healthy atomic.Bool
	load    atomic.Int64
	cb      *CircuitBreaker

	mu                   sync.Mutex
	healthFail, healthOK int
}

// New returns a healthy worker with a closed circuit breaker.
func New(url string, port int, role Role, cb CircuitConfig) *Worker {
	w := &Worker{url: url, port: port, role: role, ID: newUUID(), cb: NewCircuitBreaker(cb)}
	w.healthy.Store(true)
	return w
}

// URL is the worker's base URL, e.g. http://127.3.0.7:8000.
func (w *Worker) URL() string { return w.url }

// Model is the worker's model id (policy.ModelWorker: SG cache_aware keys
// its tree by it).
func (w *Worker) Model() string { return w.ModelID }

// Port is the worker's port.
func (w *Worker) Port() int { return w.port }

// Role is regular, prefill or decode.
func (w *Worker) Role() Role { return w.role }

// Healthy is the health-check verdict.
func (w *Worker) Healthy() bool { return w.healthy.Load() }

// SetHealthy sets the health verdict and reports whether it changed.
func (w *Worker) SetHealthy(h bool) bool { return w.healthy.Swap(h) != h }

// Load is the router's in-flight count (kept only under cache_aware).
func (w *Worker) Load() int64 { return w.load.Load() }

// IncLoad adds one in-flight request and returns the new load.
func (w *Worker) IncLoad() int64 { return w.load.Add(1) }

// DecLoad removes one in-flight request (never below zero) and returns the
// new load.
func (w *Worker) DecLoad() int64 {
	for {
		cur := w.load.Load()
		if cur <= 0 {
			return 0
		}
		if w.load.CompareAndSwap(cur, cur-1) {
			return cur - 1
		}
	}
}

// CircuitOpen reports whether the breaker refuses requests now.
func (w *Worker) CircuitOpen() bool { return !w.cb.CanExecute() }

// CircuitState is the breaker state now.
func (w *Worker) CircuitState() State { return w.cb.State() }

// Available is is_healthy() && circuit_breaker().can_execute().
func (w *Worker) Available() bool { return w.Healthy() && w.cb.CanExecute() }

// Consecutive are the breaker's consecutive failures and successes now.
func (w *Worker) Consecutive() (failures, successes int) { return w.cb.Consecutive() }

// RecordOutcome feeds the circuit breaker; it reports a state transition
// (from, to) when one happened.
func (w *Worker) RecordOutcome(success bool) (from, to State, changed bool) {
	return w.cb.RecordOutcome(success)
}

// HealthResult counts one health-check result against the thresholds and
// reports whether the worker's health verdict changed.
func (w *Worker) HealthResult(ok bool, failThreshold, successThreshold int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok {
		w.healthFail = 0
		w.healthOK++
		if !w.Healthy() && w.healthOK >= successThreshold {
			return w.SetHealthy(true)
		}
		return false
	}
	w.healthOK = 0
	w.healthFail++
	if w.Healthy() && w.healthFail >= failThreshold {
		return w.SetHealthy(false)
	}
	return false
}

// AsPolicy is ws as the routing core's candidate list.
func AsPolicy(ws []*Worker) []policy.Worker {
	out := make([]policy.Worker, len(ws))
	for i, w := range ws {
		out[i] = w
	}
	return out
}

// Order is how the registry orders candidates.
type Order int

const (
	// OrderRandom is VR's: get_all() walks a DashMap keyed by random
	// UUIDs, an order that looks random per process and stays put while
	// the membership does not change.
	OrderRandom Order = iota
	// OrderRegistration is SG's get_by_model: registration order.
	OrderRegistration
)

// Registry holds the admitted workers. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	order    Order
	rng      *mrand.Rand
	seq      uint64
	workers  []*Worker
	revision atomic.Uint64
}

// NewRegistry returns an empty registry. rng draws VR's per-worker order keys
// (seed it for reproducible tests).
func NewRegistry(order Order, rng *mrand.Rand) *Registry {
	return &Registry{order: order, rng: rng}
}

// Add registers w; it reports false when a worker with the URL exists.
func (r *Registry) Add(w *Worker) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.workers {
		if x.url == w.url {
			return false
		}
	}
	r.seq++
	w.seq = r.seq
	w.rank = r.rng.Uint64()
	r.workers = append(r.workers, w)
	r.sortLocked()
	r.revision.Add(1)
	return true
}

func (r *Registry) sortLocked() {
	if r.order == OrderRandom {
		sort.SliceStable(r.workers, func(i, j int) bool { return r.workers[i].rank < r.workers[j].rank })
		return
	}
	sort.SliceStable(r.workers, func(i, j int) bool { return r.workers[i].seq < r.workers[j].seq })
}

// Remove unregisters the worker with url and returns it (nil if absent).
func (r *Registry) Remove(url string) *Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.workers {
		if x.url == url {
			r.workers = append(r.workers[:i:i], r.workers[i+1:]...)
			r.revision.Add(1)
			return x
		}
	}
	return nil
}

// Get returns the worker with url, or nil.
func (r *Registry) Get(url string) *Worker {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, x := range r.workers {
		if x.url == url {
			return x
		}
	}
	return nil
}

// All returns the workers in candidate order.
func (r *Registry) All() []*Worker {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Worker(nil), r.workers...)
}

// Registered returns the workers in registration order, whatever the
// registry's candidate order: the registries' type and model indexes keep
// workers in the order they were registered (WorkerRegistry::get_by_type,
// get_by_model), where get_all walks the DashMap.
func (r *Registry) Registered() []*Worker {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := append([]*Worker(nil), r.workers...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// URLs returns the worker URLs in candidate order.
func (r *Registry) URLs() []string {
	ws := r.All()
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.url
	}
	return out
}

// Revision counts membership and health/circuit changes.
func (r *Registry) Revision() uint64 { return r.revision.Load() }

// Bump records a change that is not a membership change.
func (r *Registry) Bump() { r.revision.Add(1) }

// PortOf is the port of a worker URL, 80 when it names none.
func PortOf(url string) int {
	i := strings.LastIndex(url, ":")
	if i < 0 {
		return 80
	}
	n, err := strconv.Atoi(strings.TrimRight(url[i+1:], "/"))
	if err != nil {
		return 80
	}
	return n
}

// newUUID returns a random (version 4) UUID string.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// CircuitConfig is the breaker's thresholds (--cb-*; disabled breaker =
// failure threshold u32::MAX, as the routers' effective config does).
type CircuitConfig struct {
	FailureThreshold int
	SuccessThreshold int
	Timeout          time.Duration
}

// State is a circuit breaker state; its numeric value is the cb_state gauge.
type State int

const (
	Closed   State = 0
	Open     State = 1
	HalfOpen State = 2
)

// String is the metrics label (closed, open, half_open).
func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	default:
		return "closed"
	}
}

// CircuitBreaker is the routers' consecutive-failure breaker: it opens after
// FailureThreshold consecutive failures, lets requests through again
// (half-open) after Timeout, and closes after SuccessThreshold consecutive
// successes while half-open; one failure while half-open re-opens it.
type CircuitBreaker struct {
	mu         sync.Mutex
	cfg        CircuitConfig
	state      State
	fails      int
	succ       int
	lastChange time.Time
	now        func() time.Time
}

// NewCircuitBreaker returns a closed breaker.
func NewCircuitBreaker(cfg CircuitConfig) *CircuitBreaker {
	return &CircuitBreaker{cfg: cfg, now: time.Now, lastChange: time.Now()}
}

// State returns the state, moving open to half-open once the timeout passed.
func (c *CircuitBreaker) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tickLocked()
	return c.state
}

func (c *CircuitBreaker) tickLocked() {
	if c.state == Open && c.now().Sub(c.lastChange) >= c.cfg.Timeout {
		c.state = HalfOpen
		c.lastChange = c.now()
		c.fails, c.succ = 0, 0
	}
}

// Consecutive are the consecutive failures and successes now.
func (c *CircuitBreaker) Consecutive() (failures, successes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tickLocked()
	return c.fails, c.succ
}

// CanExecute is false only while open.
func (c *CircuitBreaker) CanExecute() bool { return c.State() != Open }

// RecordOutcome counts one request outcome.
func (c *CircuitBreaker) RecordOutcome(success bool) (from, to State, changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tickLocked()
	from = c.state
	if success {
		c.fails = 0
		c.succ++
		if c.state == HalfOpen && c.succ >= c.cfg.SuccessThreshold {
			c.transitionLocked(Closed)
		}
	} else {
		c.succ = 0
		c.fails++
		switch c.state {
		case Closed:
			if c.fails >= c.cfg.FailureThreshold {
				c.transitionLocked(Open)
			}
		case HalfOpen:
			c.transitionLocked(Open)
		}
	}
	return from, c.state, from != c.state
}

func (c *CircuitBreaker) transitionLocked(s State) {
	if c.state == s {
		return
	}
	c.state = s
	c.lastChange = c.now()
	switch s {
	case Closed:
		c.fails, c.succ = 0, 0
	case Open:
		c.succ = 0
	}
}
