package kube

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// costWatch counts one deployment's engine Pods for Cost: a Pod informer
// (list + watch, so a dropped watch is re-listed) on the deployment's
// namespace and instance label, from Deploy until Delete has finished.
type costWatch struct {
	ledger  clusters.CostLedger
	factory informers.SharedInformerFactory
	stop    chan struct{}
	once    sync.Once

	mu sync.Mutex
	// perPod is each role's spec.resources.accelerator (cards per Pod), for
	// Pods whose own requests name no accelerator resource.
	perPod map[string]int64
}

// watchCost starts counting md's engine Pods in namespace ns.
func (c *Cluster) watchCost(ns string, md *api.ModelDeployment) *costWatch {
	w := &costWatch{stop: make(chan struct{})}
	w.setRoles(md)
	name := md.Metadata.Name
	w.factory = informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = instanceSelector(name) }))
	saw := func(obj any, goneAt time.Time) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[api.LabelInstance] == name && isEnginePod(p) {
			w.ledger.Observe(w.observation(p, goneAt))
		}
	}
	_, err := w.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { saw(obj, time.Time{}) },
		UpdateFunc: func(_, obj any) { saw(obj, time.Time{}) },
		// A Pod holds its accelerators until it is removed, so the removal
		// as the watch saw it ends its time (not its deletionTimestamp).
		DeleteFunc: func(obj any) { saw(obj, time.Now()) },
	})
	if err != nil {
		c.logf("kube: %s/%s: engine Pods will not be counted: %v", ns, name, err)
	}
	w.factory.Start(w.stop)
	return w
}

// setRoles takes the accelerators per Pod of md's roles.
func (w *costWatch) setRoles(md *api.ModelDeployment) {
	per := map[string]int64{}
	for _, r := range md.Spec.Roles {
		per[r.Name] = podAccelerators(r)
	}
	w.mu.Lock()
	w.perPod = per
	w.mu.Unlock()
}

func (w *costWatch) observation(p *corev1.Pod, goneAt time.Time) clusters.PodObservation {
	o := clusters.PodObservation{UID: string(p.UID), Accelerators: requestedAccelerators(p), GoneAt: goneAt}
	if o.Accelerators == 0 {
		w.mu.Lock()
		o.Accelerators = w.perPod[p.Labels[api.LabelComponent]]
		w.mu.Unlock()
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			o.Ready, o.ReadySince = true, c.LastTransitionTime.Time
		}
	}
	return o
}

// close stops the informer and makes the cost final at this moment.
// Safe to call more than once.
func (w *costWatch) close() {
	w.once.Do(func() {
		close(w.stop)
		w.factory.Shutdown()
		w.ledger.Close(time.Now())
	})
}

// isEnginePod: engine Pods carry their role's component label, router Pods
// the router label (docs/operator.md#router-objects).
func isEnginePod(p *corev1.Pod) bool {
	_, role := p.Labels[api.LabelComponent]
	_, router := p.Labels[api.LabelRouter]
	return role && !router
}

// requestedAccelerators sums the GPUs the Pod's containers ask for: every
// extended resource named "<vendor>/gpu" (nvidia.com/gpu, amd.com/gpu), by
// limit (what a device plugin allocates) or else request. The operator
// derives the key from the InstanceType and it was not read from its source
// (docs/operator.md#not-established), so a Pod with none of these is counted by its role's
// spec.resources.accelerator instead.
func requestedAccelerators(p *corev1.Pod) int64 {
	var n int64
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for name, q := range c.Resources.Limits {
				if strings.HasSuffix(string(name), "/gpu") {
					n += q.Value()
				}
			}
			for name, q := range c.Resources.Requests {
				if _, limited := c.Resources.Limits[name]; !limited && strings.HasSuffix(string(name), "/gpu") {
					n += q.Value()
				}
			}
		}
	}
	return n
}

// Cost counts the deployment's engine Pods as the informer saw them: those
// created, those that became Ready, and accelerator-seconds from each Pod's
// Ready (its condition's lastTransitionTime) to its removal. After Delete it
// is final.
func (d *Deployment) Cost(context.Context) (clusters.Cost, error) {
	if d.cost == nil {
		return clusters.Cost{}, nil
	}
	return d.cost.ledger.Cost(time.Now()), nil
}
