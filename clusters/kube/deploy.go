package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// Deploy creates md. Roles without an InstanceType get the one Capacity picks
// for the whole deployment. With md.Metadata.Namespace empty, a fresh
// labelled namespace is created for it (removed again by Delete, or at once
// if the create fails); a given namespace must exist already. Every
// InstanceType used gets its LocalQueue in the namespace. An admission
// refusal is *clusters.AdmissionError. A shortage of accelerators is not an
// error here (see pickInstanceType): ask CanRun first to skip instead.
func (c *Cluster) Deploy(ctx context.Context, md *api.ModelDeployment) (clusters.Deployment, error) {
	if md == nil || md.Metadata.Name == "" {
		return nil, fmt.Errorf("deploy: the ModelDeployment needs metadata.name")
	}
	want, err := deepCopyMD(md)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", md.Metadata.Name, err)
	}
	its, err := c.placeRoles(ctx, want)
	if err != nil {
		return nil, err
	}

	ns := want.Metadata.Namespace
	owns := false
	if ns == "" {
		if ns, err = c.CreateNamespace(ctx, want.Metadata.Name); err != nil {
			return nil, err
		}
		owns = true
		want.Metadata.Namespace = ns
	}
	d := &Deployment{c: c, name: want.Metadata.Name, ns: ns, ownsNamespace: owns, routerName: routerName(want)}
	if want.Spec.Router != nil {
		d.revisions.wrote(want.Spec.Router.ExtraArgs)
	}
	fail := func(err error) (clusters.Deployment, error) {
		if owns {
			// Nothing else lives in a namespace made for this deployment and
			// it holds no GPU, so its removal is not waited for (admission
			// specs refuse dozens of objects in a row).
			if derr := c.deleteNamespace(context.WithoutCancel(ctx), ns, false); derr != nil {
				c.logf("kube: cleanup after failed deploy: %v", derr)
			}
		}
		return nil, err
	}
	for _, it := range its {
		if err := c.EnsureLocalQueue(ctx, ns, it); err != nil {
			return fail(err)
		}
	}

	if want.Metadata.Labels == nil {
		want.Metadata.Labels = map[string]string{}
	}
	for k, v := range c.ownerLabels() {
		want.Metadata.Labels[k] = v
	}
	u, err := toUnstructured(want)
	if err != nil {
		return fail(err)
	}
	created, err := c.dyn.Resource(gvrModelDeployment).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		if ae := asAdmissionError(err); ae != err {
			return fail(ae)
		}
		return fail(fmt.Errorf("create ModelDeployment %s/%s: %s", ns, want.Metadata.Name, firstLine(err.Error())))
	}
	d.uid = string(created.GetUID())
	// The stored object carries the webhook's defaults (accelerators per Pod).
	if stored, err := fromUnstructured(created); err == nil {
		want = stored
	}
	d.cost = c.watchCost(ns, want)
	c.track(d)
	c.logf("kube: created ModelDeployment %s/%s", ns, d.name)
	return d, nil
}

// placeRoles fills empty roles[].instanceType and returns every InstanceType
// the deployment uses (for their LocalQueues).
func (c *Cluster) placeRoles(ctx context.Context, md *api.ModelDeployment) ([]InstanceType, error) {
	var unplaced int64
	for _, r := range md.Spec.Roles {
		if r.InstanceType == "" {
			unplaced += roleAccelerators(r)
		}
	}
	all, err := c.InstanceTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", md.Metadata.Name, err)
	}
	if hasEmptyInstanceType(md) {
		name := c.pickInstanceType(all, unplaced)
		for i := range md.Spec.Roles {
			if md.Spec.Roles[i].InstanceType == "" {
				md.Spec.Roles[i].InstanceType = name
			}
		}
	}
	idx := map[string]InstanceType{}
	for _, it := range all {
		idx[it.Name] = it
	}
	var out []InstanceType
	seen := map[string]bool{}
	for _, r := range md.Spec.Roles {
		if seen[r.InstanceType] {
			continue
		}
		seen[r.InstanceType] = true
		it, ok := idx[r.InstanceType]
		if !ok {
			// Leave the refusal to the webhook, which names the field; the
			// LocalQueue then carries the name as its ClusterQueue.
			it = InstanceType{Name: r.InstanceType}
		}
		out = append(out, it)
	}
	return out, nil
}

// pickInstanceType is Capacity's choice among all. When nothing has room it
// still names the closest InstanceType (accelerated and Active first) instead
// of failing: admission specs must reach the webhook on a cluster without
// free accelerators, and a spec that needs serving asks CanRun first. With no
// InstanceType at all the field stays empty and the webhook names it.
func (c *Cluster) pickInstanceType(all []InstanceType, need int64) string {
	it, ce := c.chooseInstanceType(all, need)
	if ce == nil {
		return it.Name
	}
	c.logf("kube: %s; deploying anyway (it will not become Ready)", ce.Reason)
	best := -1
	rank := func(it InstanceType) int {
		r := 0
		if it.Phase == PhaseActive {
			r += 2
		}
		if it.Acceleratable {
			r++
		}
		return r
	}
	for i, it := range all {
		if c.opts.InstanceType != "" && it.Name != c.opts.InstanceType {
			continue
		}
		if best < 0 || rank(it) > rank(all[best]) {
			best = i
		}
	}
	if best < 0 {
		return c.opts.InstanceType
	}
	return all[best].Name
}

func hasEmptyInstanceType(md *api.ModelDeployment) bool {
	for _, r := range md.Spec.Roles {
		if r.InstanceType == "" {
			return true
		}
	}
	return false
}

func routerName(md *api.ModelDeployment) string {
	if md.Spec.Router == nil {
		return ""
	}
	return md.Spec.Router.Name
}

// Deployment is one ModelDeployment on the cluster.
type Deployment struct {
	c             *Cluster
	name, ns      string
	uid           string
	ownsNamespace bool

	// cost counts the engine Pods from Deploy until Delete has finished.
	cost *costWatch

	// revisions tells the router Pods of the args last written from older
	// ones (rollout.go).
	revisions routerRevisions

	mu         sync.Mutex
	routerName string
	proxy      *localProxy
}

var _ clusters.Deployment = (*Deployment)(nil)

// Name is metadata.name.
func (d *Deployment) Name() string { return d.name }

// Namespace is the deployment's namespace.
func (d *Deployment) Namespace() string { return d.ns }

// Object returns the live object with its status.
func (d *Deployment) Object(ctx context.Context) (*api.ModelDeployment, error) {
	u, err := d.c.dyn.Resource(gvrModelDeployment).Namespace(d.ns).Get(ctx, d.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get ModelDeployment %s/%s: %w", d.ns, d.name, err)
	}
	return fromUnstructured(u)
}

func (d *Deployment) router() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.routerName
}

// Delete removes the ModelDeployment and waits until it and its Pods are
// gone; a namespace Deploy created is then removed too (after its labels are
// checked). Safe to call twice and from DeferCleanup after a failure.
func (d *Deployment) Delete(ctx context.Context) error {
	d.closeProxy()
	defer d.c.untrack(d)
	defer d.closeCost() // after the Pods are gone (or the wait gave up)
	ctx, cancel := context.WithTimeout(ctx, d.c.iv.Delete)
	defer cancel()
	var errs []error
	res := d.c.dyn.Resource(gvrModelDeployment).Namespace(d.ns)
	opts := metav1.DeleteOptions{}
	if d.uid != "" {
		uid := types.UID(d.uid)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := res.Delete(ctx, d.name, opts)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		err = poll(ctx, d.c.iv.Poll, func(ctx context.Context) (bool, string, error) {
			u, err := res.Get(ctx, d.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && d.uid != "" && string(u.GetUID()) != d.uid) {
				return true, "", nil
			}
			if err != nil {
				return false, firstLine(err.Error()), nil
			}
			return false, fmt.Sprintf("ModelDeployment %s/%s still exists (finalizers %v)", d.ns, d.name, u.GetFinalizers()), nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("delete ModelDeployment %s/%s: %w", d.ns, d.name, err))
		}
	default:
		errs = append(errs, fmt.Errorf("delete ModelDeployment %s/%s: %s", d.ns, d.name, firstLine(err.Error())))
	}
	if d.ownsNamespace {
		// Deleting the namespace also collects a router Deployment the
		// operator was slow to prune (issue #601).
		if err := d.c.DeleteNamespace(ctx, d.ns); err != nil {
			errs = append(errs, err)
		}
	} else if err := d.waitPodsGone(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (d *Deployment) waitPodsGone(ctx context.Context) error {
	return poll(ctx, d.c.iv.Poll, func(ctx context.Context) (bool, string, error) {
		pods, err := d.pods(ctx, instanceSelector(d.name))
		if err != nil {
			return false, firstLine(err.Error()), nil
		}
		if len(pods) == 0 {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d Pods of %s/%s remain (e.g. %s)", len(pods), d.ns, d.name, pods[0].Name), nil
	})
}

func (d *Deployment) closeCost() {
	if d.cost != nil {
		d.cost.close()
	}
}
