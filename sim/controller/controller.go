// Package controller is the sim's ModelDeployment controller: the operator's
// reconcile loop around the pure functions of package operator. A Controller
// owns one deployment's object (spec and status, as the API server would
// store it) and makes the kubelet's Pods match it: engine Pods per role and
// ordinal, the router Deployment's rolling update, the routers' endpoint
// views and the status computed from what it saw. It also counts the engine
// Pods it ran (Cost).
//
// Admission is not here: whoever stores a spec (the sim target's Deploy and
// Update) admits and defaults it first, as the API server runs the webhook
// before the controller ever sees the object.
//
// The Pods live in a Store: the sim's kubelet by default, or a real API
// server (sim/apiserver/operator, which the apiserver tier runs), which then
// also holds the object (Observe), receives its status (Config.OnStatus) and,
// as a RouterStore, runs the router as the Deployment the operator renders.
package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/service"
)

// Store is where a Controller's Pods live and how it learns that they
// changed. *kubelet.Kubelet is one; an API server's Pods are another.
type Store interface {
	// ListStatus returns the Pods in namespace whose labels include every
	// pair in selector, sorted by name.
	ListStatus(namespace string, selector map[string]string) []kubelet.PodStatus
	// Create creates a Pod; a Store backed by an API server runs its
	// containers' programs by their Command, not by Main.
	Create(spec kubelet.PodSpec) (kubelet.PodStatus, error)
	// Delete deletes a Pod gracefully; false when it does not exist.
	Delete(namespace, name string) bool
	// Pods ticks on every Pod change (Watch).
	Pods() proc.PodWatcher
}

// RouterStore is a Store that runs the router the way the operator renders
// it, as the Deployment <md>-router whose own controllers roll its Pods (an
// API server with the deployment and ReplicaSet controllers). With a plain
// Store the Controller rolls the router Pods itself, as those would.
type RouterStore interface {
	Store
	// ApplyRouter makes md's router Deployment run template, and returns
	// the pod-template-hash label of its current revision's Pods ("" while
	// not known yet).
	ApplyRouter(md *api.ModelDeployment, w operator.RouterWorkload, template kubelet.PodSpec) (string, error)
	// DeleteRouter removes md's router Deployment, if any.
	DeleteRouter(md *api.ModelDeployment) error
}

// Config is what a Controller runs on. Every field is required except
// EngineEnv, Store, OnStatus and EventSink.
type Config struct {
	// Kubelet runs the Pods (when Store is nil).
	Kubelet *kubelet.Kubelet
	// Store, if set, holds the Pods instead of Kubelet.
	Store Store
	// OnStatus, if set, receives the object with the status of every pass
	// (a copy), from the loop's goroutine: a Store backed by an API server
	// writes it through the status subresource.
	OnStatus func(*api.ModelDeployment)
	// EventSink, if set, receives every event the controller records about
	// its deployment.
	EventSink func(kubelet.Event)
	// Programs resolves the programs the operator renders.
	Programs programs.Registry
	// EngineEnv is added to every engine container's environment (the sim's
	// SIM_ENGINE_* knobs); a role's own env entry of the same name wins.
	EngineEnv map[string]string
	// Timing is the loop's scaled clock (WithDefaults fills what is zero).
	Timing
	// Get reads a router's endpoint view: url within timeout, up to limit
	// bytes; an answer other than 200 is an error.
	Get func(ctx context.Context, url string, timeout time.Duration, limit int64) ([]byte, error)
	// TestOnlyReplaceEnginesOnRouterEdit makes this operator unlike the
	// real one: an edit of spec.router also deletes every engine Pod (they
	// are recreated), as another operator version could. Off by default;
	// only the tests of the suite's guard over its own edits turn it on.
	TestOnlyReplaceEnginesOnRouterEdit bool
}

// Timing is the sim's scaled clock for one deployment's loop and the Pods
// it renders. Both runners of the loop (the sim target and the API-server
// tier's operator) take it, so its defaults are defined here once.
type Timing struct {
	// ProbePeriod paces the Pods' probes (default 50 ms; the operator's 10 s):
	// the engines' startup probe (180 periods allowed, as the operator's) and
	// the routers' TCP readiness run at this period, the engines' readiness
	// and liveness probes at 4 periods.
	ProbePeriod time.Duration
	// ResyncPeriod is the interval between two passes without a Pod change
	// (default 50 ms).
	ResyncPeriod time.Duration
	// PreStopDelay is how long a deleted engine Pod keeps serving with its
	// deletionTimestamp set, so routers drop it first (default 100 ms; the
	// operator's drain hook waits about 5 s on an idle engine).
	PreStopDelay time.Duration
	// ServingValidity bounds the age of a router's endpoint view (default
	// 2 s; the operator's 15 s).
	ServingValidity time.Duration
}

// WithDefaults is t with every duration that is not positive set to its
// default.
func (t Timing) WithDefaults() Timing {
	if t.ProbePeriod <= 0 {
		t.ProbePeriod = 50 * time.Millisecond
	}
	if t.ResyncPeriod <= 0 {
		t.ResyncPeriod = 50 * time.Millisecond
	}
	if t.PreStopDelay <= 0 {
		t.PreStopDelay = 100 * time.Millisecond
	}
	if t.ServingValidity <= 0 {
		t.ServingValidity = 2 * time.Second
	}
	return t
}

// ErrConflict is Apply's answer to an object read before the stored one
// last changed (its resourceVersion is not the stored one), as the API
// server answers 409: read again, mutate again, apply again.
var ErrConflict = errors.New("the object has been modified; apply your changes to the latest version and try again")

// Controller is one ModelDeployment and its reconcile loop. Create it with
// New, run it with Start, end it with Delete.
type Controller struct {
	cfg             Config
	name, namespace string

	mu         sync.Mutex
	obj        *api.ModelDeployment // spec (admitted, defaulted) and the last status
	deleting   bool
	events     []kubelet.Event
	views      []operator.RouterView
	observedAt time.Time
	podsSeen   string
	converged  bool
	// configMap is the router ConfigMap the operator renders (llm-d-router
	// only): its name and data, nil when there is none.
	configMapName string
	configMap     map[string]string
	// rendered is the router render of generation renderedGen: the spec
	// is all it reads, so a pass renders again only after an edit (the
	// llm-d render marshals a YAML document).
	rendered    *operator.RouterWorkload
	renderedGen int64
	// replaceEngines: a router edit under TestOnlyReplaceEnginesOnRouterEdit
	// waits for the next pass to delete the engine Pods.
	replaceEngines bool

	// svc is the <md>-router Service (service.go) on svcIP, fed from the
	// router Pods' endpoints by Pod UID; guarded by mu.
	svc       *service.Service
	svcIP     string
	endpoints map[string]service.Endpoint

	trigger chan struct{}
	stop    chan struct{} // closed by Stop
	stopped sync.Once
	done    chan struct{} // closed when the loop has returned
}

// New takes md as stored: admitted, defaulted, with its metadata set.
func New(cfg Config, md *api.ModelDeployment) *Controller {
	c := &Controller{cfg: cfg, name: md.Metadata.Name, namespace: md.Metadata.Namespace,
		obj: operator.DeepCopy(md), trigger: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{})}
	c.normal("Admitted", fmt.Sprintf("ModelDeployment %s admitted (router %s)", c.key(), routerName(md)))
	return c
}

func routerName(md *api.ModelDeployment) string {
	if md.Spec.Router == nil {
		return "none"
	}
	return md.Spec.Router.Name
}

func (c *Controller) key() string { return c.namespace + "/" + c.name }

// Start runs the reconcile loop in the background until the deleted
// deployment has no Pods left.
func (c *Controller) Start() {
	go func() {
		defer close(c.done)
		c.run()
	}()
}

// store is where the Pods live: Config.Store, else the kubelet.
func (c *Controller) store() Store {
	if c.cfg.Store != nil {
		return c.cfg.Store
	}
	return c.cfg.Kubelet
}

func (c *Controller) run() {
	ticks, stopWatch := c.store().Pods().Watch()
	defer stopWatch()
	t := time.NewTicker(c.cfg.ResyncPeriod)
	defer t.Stop()
	// Passes are not cancelled: a deletion, not a context, ends the loop, so
	// the Pods are always cleaned up.
	ctx := context.Background()
	for {
		if gone := c.reconcile(ctx); gone {
			c.stopService()
			return
		}
		select {
		case <-c.trigger:
		case <-ticks:
		case <-t.C:
		case <-c.stop:
			return
		}
	}
}

// Stop ends the loop after its current pass without deleting anything: the
// Pods stay where the Store keeps them (an operator shutting down).
func (c *Controller) Stop() {
	c.stopped.Do(func() { close(c.stop) })
}

// poke asks for a pass now.
func (c *Controller) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Done is closed once a deleted deployment's Pods are gone.
func (c *Controller) Done() <-chan struct{} { return c.done }

// Gone reports whether Done is closed.
func (c *Controller) Gone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Object returns a copy of the stored object with its status.
func (c *Controller) Object() *api.ModelDeployment {
	c.mu.Lock()
	defer c.mu.Unlock()
	return operator.DeepCopy(c.obj)
}

// Apply stores next (admitted and defaulted by the caller) as the API
// server stores an update: next must carry the stored resourceVersion
// (ErrConflict otherwise), the status stays the controller's, a spec change
// bumps the generation, and the resourceVersion moves on.
func (c *Controller) Apply(next *api.ModelDeployment) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleting {
		return fmt.Errorf("%s is being deleted", c.key())
	}
	old := c.obj
	if next.Metadata.ResourceVersion != old.Metadata.ResourceVersion {
		return fmt.Errorf("update %s: %w", c.key(), ErrConflict)
	}
	next = operator.DeepCopy(next)
	next.Status = old.Status
	next.Metadata.Generation = old.Metadata.Generation
	if !reflect.DeepEqual(next.Spec, old.Spec) {
		next.Metadata.Generation++
		c.converged = false
	}
	c.noteRouterEdit(old, next)
	rv, _ := strconv.Atoi(old.Metadata.ResourceVersion)
	next.Metadata.ResourceVersion = strconv.Itoa(rv + 1)
	c.obj = next
	c.events = append(c.events, kubelet.Event{Time: time.Now(), Namespace: c.namespace,
		Type: "Normal", Reason: "Updated", Message: fmt.Sprintf("spec updated to generation %d",
			next.Metadata.Generation)})
	c.poke()
	return nil
}

// Observe takes next as an API server stored it: spec, metadata (with the
// generation the server assigned) and no admission, which the server ran.
// The status stays the controller's.
func (c *Controller) Observe(next *api.ModelDeployment) {
	c.mu.Lock()
	next = operator.DeepCopy(next)
	next.Status = c.obj.Status
	if !reflect.DeepEqual(next.Spec, c.obj.Spec) {
		c.converged = false
	}
	c.noteRouterEdit(c.obj, next)
	c.obj = next
	c.mu.Unlock()
	c.poke()
}

// noteRouterEdit arms TestOnlyReplaceEnginesOnRouterEdit when spec.router
// changed; c.mu is held.
func (c *Controller) noteRouterEdit(old, next *api.ModelDeployment) {
	if c.cfg.TestOnlyReplaceEnginesOnRouterEdit && !reflect.DeepEqual(old.Spec.Router, next.Spec.Router) {
		c.replaceEngines = true
	}
}

// Delete marks the deployment for deletion; the loop then deletes its Pods
// and ends once they are gone (Done).
func (c *Controller) Delete() {
	c.mu.Lock()
	first := !c.deleting
	c.deleting = true
	c.mu.Unlock()
	if first {
		c.normal("Deleting", "ModelDeployment deletion requested")
	}
	c.poke()
}

// Record keeps a kubelet event about one of this deployment's Pods.
func (c *Controller) Record(e kubelet.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

// Events returns what happened to the deployment and its Pods, in order.
func (c *Controller) Events() []kubelet.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.events)
	slices.SortStableFunc(out, func(a, b kubelet.Event) int { return a.Time.Compare(b.Time) })
	return out
}

func (c *Controller) normal(reason, msg string) { c.own("Normal", reason, msg) }
func (c *Controller) warn(reason, msg string)   { c.own("Warning", reason, msg) }

func (c *Controller) own(typ, reason, msg string) {
	e := kubelet.Event{Time: time.Now(), Namespace: c.namespace, Type: typ, Reason: reason, Message: msg}
	c.Record(e)
	if c.cfg.EventSink != nil {
		c.cfg.EventSink(e)
	}
}

// renderRouter is operator.RenderRouter(md), kept per generation.
func (c *Controller) renderRouter(md *api.ModelDeployment) (operator.RouterWorkload, error) {
	c.mu.Lock()
	if c.rendered != nil && c.renderedGen == md.Metadata.Generation {
		w := *c.rendered
		c.mu.Unlock()
		return w, nil
	}
	c.mu.Unlock()
	w, err := operator.RenderRouter(md)
	if err != nil {
		return w, err
	}
	c.mu.Lock()
	c.rendered, c.renderedGen = &w, md.Metadata.Generation
	c.mu.Unlock()
	return w, nil
}

// storeConfigMap keeps the rendered router ConfigMap, as the operator
// writes <md>-router; nil data prunes it.
func (c *Controller) storeConfigMap(name string, data map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if data == nil {
		c.configMapName, c.configMap = "", nil
		return
	}
	c.configMapName, c.configMap = name, maps.Clone(data)
}

// ConfigMap returns the data of the deployment's ConfigMap name, if the
// operator has written one by that name and the deployment is not gone.
func (c *Controller) ConfigMap(name string) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.configMap == nil || name != c.configMapName {
		return nil, false
	}
	return maps.Clone(c.configMap), true
}

// PodChanged takes the kubelet's status update of one of this deployment's
// Pods: router Pods are the router Service's endpoints.
func (c *Controller) PodChanged(u kubelet.PodUpdate) {
	if _, router := u.Pod.Labels[api.LabelRouter]; router {
		c.routerEndpointChanged(u)
	}
}

// IsEnginePod: engine Pods carry the role's component label, router Pods
// the router label.
func IsEnginePod(labels map[string]string) bool {
	_, role := labels[api.LabelComponent]
	_, router := labels[api.LabelRouter]
	return role && !router
}

// engineEnv is a fresh copy of the engines' knobs for one container.
func (c *Controller) engineEnv() map[string]string {
	env := maps.Clone(c.cfg.EngineEnv)
	if env == nil {
		env = map[string]string{}
	}
	return env
}

// HTTPGet is a Config.Get over client: url within timeout and up to limit
// bytes; an answer other than 200 is an error naming its status.
func HTTPGet(client *http.Client) func(ctx context.Context, url string, timeout time.Duration, limit int64) ([]byte, error) {
	return func(ctx context.Context, url string, timeout time.Duration, limit int64) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return body, nil
	}
}
