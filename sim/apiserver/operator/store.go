package operator

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	listersappsv1 "k8s.io/client-go/listers/apps/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/apiserver/podconv"
	"github.com/gpustack/routing-conformance/sim/controller"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// Annotations the Deployment controller writes and this store reads.
const (
	annotationRevision = "deployment.kubernetes.io/revision"
	// annotationTemplate carries the sim's template hash on the Deployment,
	// so an unchanged render is not written again.
	annotationTemplate = "modeldeployment.gpustack.ai/router-template-hash"
)

// cacheWait bounds the wait for the informers to see the store's own write,
// so the next pass does not act on a list from before it.
const cacheWait = 5 * time.Second

// indexers are the operator's informers' listers.
type indexers struct {
	pods        listerscorev1.PodLister
	deployments listersappsv1.DeploymentLister
	replicasets listersappsv1.ReplicaSetLister
	services    listerscorev1.ServiceLister
	watch       *podconv.Watcher
	hasSynced   []cache.InformerSynced
}

func newIndexers(f informers.SharedInformerFactory) indexers {
	pods := f.Core().V1().Pods()
	ix := indexers{
		pods:        pods.Lister(),
		deployments: f.Apps().V1().Deployments().Lister(),
		replicasets: f.Apps().V1().ReplicaSets().Lister(),
		services:    f.Core().V1().Services().Lister(),
	}
	ix.watch = podconv.NewWatcher(ix.pods)
	tick := func(any) { ix.watch.Notify() }
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: tick, UpdateFunc: func(_, obj any) { tick(obj) }, DeleteFunc: tick})
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), f.Apps().V1().Deployments().Informer(),
		f.Apps().V1().ReplicaSets().Informer(), f.Core().V1().Services().Informer()} {
		ix.hasSynced = append(ix.hasSynced, inf.HasSynced)
	}
	return ix
}

func (ix indexers) synced() []cache.InformerSynced { return ix.hasSynced }

// store is one ModelDeployment's view of the API server, as the sim's
// reconcile loop uses it (controller.RouterStore).
type store struct {
	o         *Operator
	owner     metav1.OwnerReference
	namespace string
}

var _ controller.RouterStore = (*store)(nil)

func (s *store) ListStatus(namespace string, selector map[string]string) []kubelet.PodStatus {
	pods, err := s.o.ix.pods.Pods(namespace).List(labels.SelectorFromSet(selector))
	if err != nil {
		return nil
	}
	out := make([]kubelet.PodStatus, 0, len(pods))
	for _, p := range pods {
		out = append(out, podconv.FromStatus(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *store) Pods() proc.PodWatcher { return s.o.ix.watch }

// Create creates the Pod owned by the ModelDeployment and waits until the
// informer has it.
func (s *store) Create(spec kubelet.PodSpec) (kubelet.PodStatus, error) {
	pod := podconv.ToPod(spec)
	pod.OwnerReferences = []metav1.OwnerReference{s.owner}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	created, err := s.o.kube.CoreV1().Pods(spec.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return kubelet.PodStatus{}, err
	}
	s.awaitCache(func() bool {
		p, err := s.o.ix.pods.Pods(created.Namespace).Get(created.Name)
		return err == nil && p.UID == created.UID
	})
	return podconv.FromStatus(created), nil
}

// Delete deletes the Pod gracefully and waits until the informer shows it
// terminating or gone.
func (s *store) Delete(namespace, name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	err := s.o.kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		s.o.opts.Logf("sim operator: delete Pod %s/%s: %v", namespace, name, err)
		return false
	}
	s.awaitCache(func() bool {
		p, err := s.o.ix.pods.Pods(namespace).Get(name)
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil)
	})
	return true
}

func (s *store) awaitCache(seen func() bool) {
	_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, cacheWait, true,
		func(context.Context) (bool, error) { return seen(), nil })
}

// ApplyRouter creates or updates the Deployment <md>-router (and its
// Service) with the rendered template, and returns the pod-template-hash of
// the Deployment's current revision, which the ReplicaSet controller puts on
// that revision's Pods.
func (s *store) ApplyRouter(md *api.ModelDeployment, w operator.RouterWorkload, tmpl kubelet.PodSpec) (string, error) {
	if err := s.ensureServices(md, w); err != nil {
		return "", err
	}
	// The ConfigMap first: the router Pods mount it and read env from it.
	if err := s.applyConfigMap(md, w); err != nil {
		return "", err
	}
	want := s.routerDeployment(md, w, tmpl)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	deps := s.o.kube.AppsV1().Deployments(s.namespace)
	cur, err := s.o.ix.deployments.Deployments(s.namespace).Get(w.Name)
	switch {
	case apierrors.IsNotFound(err):
		// The Pods run as the router's ServiceAccount: it and its RBAC first.
		if err := s.ensureRouterRBAC(md, w.Name); err != nil {
			return "", err
		}
		created, err := deps.Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		s.awaitCache(func() bool {
			d, err := s.o.ix.deployments.Deployments(s.namespace).Get(w.Name)
			return err == nil && d.UID == created.UID
		})
		return "", nil
	case err != nil:
		return "", err
	case cur.Annotations[annotationTemplate] != w.TemplateHash || *cur.Spec.Replicas != *want.Spec.Replicas:
		next := cur.DeepCopy()
		next.Annotations = want.Annotations
		next.Spec.Replicas, next.Spec.Template = want.Spec.Replicas, want.Spec.Template
		updated, err := deps.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return "", err
		}
		s.awaitCache(func() bool {
			d, err := s.o.ix.deployments.Deployments(s.namespace).Get(w.Name)
			return err == nil && d.ResourceVersion == updated.ResourceVersion
		})
		return "", nil
	}
	return s.currentHash(cur), nil
}

// routerDeployment is the Deployment the operator renders for the router:
// selector and template labels without the pod-template-hash, which the
// ReplicaSet controller adds.
func (s *store) routerDeployment(md *api.ModelDeployment, w operator.RouterWorkload, tmpl kubelet.PodSpec) *appsv1.Deployment {
	pod := podconv.ToPod(tmpl)
	podLabels := maps.Clone(w.Labels)
	delete(podLabels, operator.LabelPodTemplateHash)
	selector := operator.RouterLabels(md)
	replicas := md.Spec.Router.RouterReplicas()
	// As the operator renders it: the Pods run as <md>-router, the
	// ServiceAccount ensureRouterRBAC grants Pod reads.
	spec := pod.Spec
	spec.ServiceAccountName = w.Name
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: w.Name, Namespace: s.namespace, Labels: selector,
			Annotations:     map[string]string{annotationTemplate: w.TemplateHash},
			OwnerReferences: []metav1.OwnerReference{s.owner},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(w.Annotations)},
				Spec:       spec,
			},
		},
	}
}

// currentHash is the pod-template-hash of d's current revision: the
// ReplicaSet it owns with the same revision annotation.
func (s *store) currentHash(d *appsv1.Deployment) string {
	rev := d.Annotations[annotationRevision]
	if rev == "" {
		return ""
	}
	rss, err := s.o.ix.replicasets.ReplicaSets(s.namespace).List(labels.SelectorFromSet(d.Spec.Selector.MatchLabels))
	if err != nil {
		return ""
	}
	for _, rs := range rss {
		if metav1.IsControlledBy(rs, d) && rs.Annotations[annotationRevision] == rev {
			return rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		}
	}
	return ""
}

// ensureServices creates, once each, the Services the operator renders
// (docs/operator.md#services): <md>-router on the router's ports, and per
// role <md>-<role> on its serving port, which llm-d's EPP calls for
// /render, and <md> in front of the first role. The tier creates them with
// the router (every deployment of the suite has one); the node agent plays
// kube-proxy for them.
func (s *store) ensureServices(md *api.ModelDeployment, w operator.RouterWorkload) error {
	if err := s.ensureService(w.Name, operator.RouterLabels(md), operator.RouterLabels(md), []corev1.ServicePort{
		{Name: podconv.PortHTTP, Port: api.RouterHTTPPort, TargetPort: intstr.FromInt32(api.RouterHTTPPort)},
		{Name: podconv.PortMetrics, Port: api.RouterMetricsPort, TargetPort: intstr.FromInt32(api.RouterMetricsPort)},
	}); err != nil {
		return err
	}
	labels := map[string]string{api.LabelName: api.NameValue, api.LabelInstance: md.Metadata.Name}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		port := operator.ServingPort(role)
		ports := []corev1.ServicePort{{Name: podconv.PortHTTP, Port: port, TargetPort: intstr.FromInt32(port)}}
		selector := operator.RoleSelector(md, role)
		if err := s.ensureService(md.Metadata.Name+"-"+role.Name, labels, selector, ports); err != nil {
			return err
		}
		if i == 0 {
			if err := s.ensureService(md.Metadata.Name, labels, selector, ports); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureService creates Service name once, owned by the ModelDeployment.
func (s *store) ensureService(name string, labels, selector map[string]string, ports []corev1.ServicePort) error {
	if _, err := s.o.ix.services.Services(s.namespace).Get(name); err == nil {
		return nil
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{s.owner}},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: ports},
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if _, err := s.o.kube.CoreV1().Services(s.namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("Service %s: %w", name, err)
	}
	s.awaitCache(func() bool {
		_, err := s.o.ix.services.Services(s.namespace).Get(name)
		return err == nil
	})
	return nil
}

// applyConfigMap writes the router ConfigMap <md>-router the operator
// renders for llm-d-router (w.Config), owned by the ModelDeployment; a
// router that renders none has none.
func (s *store) applyConfigMap(md *api.ModelDeployment, w operator.RouterWorkload) error {
	if w.Config == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cms := s.o.kube.CoreV1().ConfigMaps(s.namespace)
	cur, err := cms.Get(ctx, w.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: s.namespace,
			Labels: operator.RouterLabels(md), OwnerReferences: []metav1.OwnerReference{s.owner}}, Data: w.Config}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("router ConfigMap %s: %w", w.Name, err)
		}
	case err != nil:
		return fmt.Errorf("router ConfigMap %s: %w", w.Name, err)
	case !maps.Equal(cur.Data, w.Config):
		cur.Data = maps.Clone(w.Config)
		if _, err := cms.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("router ConfigMap %s: %w", w.Name, err)
		}
	}
	return nil
}

// DeleteRouter deletes the router's Deployment, Service, ConfigMap and
// RBAC (ServiceAccount, Role, RoleBinding); the garbage collector removes
// the ReplicaSets and Pods.
func (s *store) DeleteRouter(md *api.ModelDeployment) error {
	name := operator.RouterServiceName(md)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if d, err := s.o.ix.deployments.Deployments(s.namespace).Get(name); err == nil && d.DeletionTimestamp == nil {
		bg := metav1.DeletePropagationBackground
		err := s.o.kube.AppsV1().Deployments(s.namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if _, err := s.o.ix.services.Services(s.namespace).Get(name); err == nil {
		err := s.o.kube.CoreV1().Services(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	err := s.o.kube.CoreV1().ConfigMaps(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return s.deleteRouterRBAC(ctx, name)
}
