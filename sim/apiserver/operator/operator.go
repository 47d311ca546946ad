// Package operator runs the sim operator against a real API server: it
// watches ModelDeployments, and for each one runs the sim's reconcile loop
// (package sim/controller, with the pure rendering and status of
// package sim/operator) on a Store backed by the API server. Engine
// Pods are created with an owner reference to their ModelDeployment, the
// router is the Deployment <md>-router with its Service (rolled by the
// cluster's deployment and ReplicaSet controllers) and the ServiceAccount,
// Role and RoleBinding its Pods run as, and status is written
// through the status subresource. The API server is the only source of
// truth: whatever the loop reads, it reads from informers.
//
// Admission is not here: the API server calls the sim's webhooks (package
// sim/apiserver/webhook) before anything is stored. In this package the name
// operator is the import of sim/operator, the rendering the loop runs.
package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/apiserver/webhook"
	"github.com/gpustack/routing-conformance/sim/controller"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/programs"
)

// GVR is the ModelDeployment resource.
var GVR = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: api.Resource}

// requestTimeout bounds one API call of the operator.
const requestTimeout = 10 * time.Second

// Options configure the operator; zero values take the sim's defaults
// (sim.Options), except ResyncPeriod, which is slower: a pass that finds
// nothing changed costs nothing, but every pass reads the routers' views.
type Options struct {
	// Programs resolves the rendered programs (default programs.Default());
	// the node agent, not the operator, runs them.
	Programs programs.Registry
	// EngineEnv is every engine container's extra environment (the sim's
	// SIM_ENGINE_* knobs).
	EngineEnv map[string]string
	// Timing is the loops' scaled clock: controller.Timing's defaults,
	// but ResyncPeriod 200 ms.
	controller.Timing
	// Logf receives what the operator could not do.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	o.Programs = o.Programs.Merge(programs.Default())
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 200 * time.Millisecond
	}
	o.Timing = o.Timing.WithDefaults()
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Operator reconciles every ModelDeployment of the API server.
type Operator struct {
	opts   Options
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	events record.EventRecorder
	bcast  record.EventBroadcaster
	http   *http.Client
	ix     indexers

	mu          sync.Mutex
	controllers map[types.UID]*controller.Controller
	stopping    bool

	cancel  context.CancelFunc
	stopped chan struct{} // closed when the informers have stopped
}

// Start runs the operator until Stop. ctx bounds the start only.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Operator, error) {
	opts = opts.withDefaults()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	o := &Operator{
		opts: opts, kube: kube, dyn: dyn, cancel: cancel, stopped: make(chan struct{}),
		controllers: map[types.UID]*controller.Controller{},
		http:        &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: 2 * time.Second}},
	}
	o.bcast = record.NewBroadcaster(record.WithContext(runCtx))
	o.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	o.events = o.bcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "gpustack-operator (sim)"})

	factory := informers.NewSharedInformerFactory(kube, 0)
	o.ix = newIndexers(factory)
	mds := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0).ForResource(GVR)
	if _, err := mds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    o.observe,
		UpdateFunc: func(_, obj any) { o.observe(obj) },
		DeleteFunc: o.deleted,
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(runCtx.Done())
	go mds.Informer().Run(runCtx.Done())
	go func() {
		<-runCtx.Done()
		factory.Shutdown()
		close(o.stopped)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), append(o.ix.synced(), mds.Informer().HasSynced)...) {
		o.Stop(context.Background())
		return nil, fmt.Errorf("sim operator: informers did not sync: %w", ctx.Err())
	}
	return o, nil
}

// Stop ends every reconcile loop (their objects stay) and the informers.
func (o *Operator) Stop(ctx context.Context) error {
	o.mu.Lock()
	o.stopping = true
	ctrls := make([]*controller.Controller, 0, len(o.controllers))
	for _, c := range o.controllers {
		ctrls = append(ctrls, c)
	}
	o.mu.Unlock()
	var errs []error
	for _, c := range ctrls {
		c.Stop()
	}
	for _, c := range ctrls {
		select {
		case <-c.Done():
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("sim operator: a reconcile loop is still running: %w", ctx.Err()))
		}
	}
	o.cancel()
	select {
	case <-o.stopped:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("sim operator: informers still running: %w", ctx.Err()))
	}
	o.bcast.Shutdown()
	o.http.CloseIdleConnections()
	return errors.Join(errs...)
}

// observe starts a loop for a new ModelDeployment, hands an update to its
// loop, and tells it about a deletion.
func (o *Operator) observe(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	md, err := decode(u)
	if err != nil {
		o.opts.Logf("sim operator: %s/%s: %v", u.GetNamespace(), u.GetName(), err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopping {
		return
	}
	c, running := o.controllers[u.GetUID()]
	switch {
	case running && u.GetDeletionTimestamp() != nil:
		c.Delete()
	case running:
		c.Observe(md)
	case u.GetDeletionTimestamp() == nil:
		c = controller.New(o.config(u, md), md)
		o.controllers[u.GetUID()] = c
		c.Start()
		go o.forget(u.GetUID(), c)
	}
}

func (o *Operator) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	o.mu.Lock()
	c := o.controllers[u.GetUID()]
	o.mu.Unlock()
	if c != nil {
		c.Delete()
	}
}

// forget drops a loop once its deployment and Pods are gone.
func (o *Operator) forget(uid types.UID, c *controller.Controller) {
	<-c.Done()
	o.mu.Lock()
	if o.controllers[uid] == c {
		delete(o.controllers, uid)
	}
	o.mu.Unlock()
}

func (o *Operator) config(u *unstructured.Unstructured, md *api.ModelDeployment) controller.Config {
	ref := &corev1.ObjectReference{APIVersion: api.APIVersion, Kind: api.Kind, Namespace: u.GetNamespace(),
		Name: u.GetName(), UID: u.GetUID()}
	owner := metav1.OwnerReference{APIVersion: api.APIVersion, Kind: api.Kind, Name: u.GetName(), UID: u.GetUID(),
		Controller: new(bool), BlockOwnerDeletion: new(bool)}
	*owner.Controller, *owner.BlockOwnerDeletion = true, true
	w := &statusWriter{o: o, namespace: u.GetNamespace(), name: u.GetName(), uid: u.GetUID()}
	return controller.Config{
		Store:     &store{o: o, owner: owner, namespace: md.Metadata.Namespace},
		Programs:  o.opts.Programs,
		EngineEnv: o.opts.EngineEnv,
		Timing:    o.opts.Timing,
		Get:       controller.HTTPGet(o.http),
		OnStatus:  w.write,
		EventSink: func(e kubelet.Event) { o.events.Event(ref, e.Type, e.Reason, e.Message) },
	}
}

// decode reads a stored ModelDeployment as the sim's types hold it.
func decode(u *unstructured.Unstructured) (*api.ModelDeployment, error) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	return webhook.Decode(raw)
}

// statusWriter writes one deployment's status when it changed, as a JSON
// patch of /status through the status subresource.
type statusWriter struct {
	o               *Operator
	namespace, name string
	uid             types.UID
	last            []byte // the status last written
}

func (w *statusWriter) write(md *api.ModelDeployment) {
	body, err := json.Marshal(md.Status)
	if err != nil || string(body) == string(w.last) {
		return
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(w.uid)},
		{"op": "add", "path": "/status", "value": json.RawMessage(body)},
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, err = w.o.dyn.Resource(GVR).Namespace(w.namespace).Patch(ctx, w.name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: "gpustack-operator-sim"}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "uid") {
		return // deleted (or replaced): nothing to write to
	}
	if err != nil {
		w.o.opts.Logf("sim operator: status of %s/%s: %v", w.namespace, w.name, err)
		return // the next pass tries again
	}
	w.last = body
}
