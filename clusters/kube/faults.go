package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

var _ clusters.FaultInjector = (*Deployment)(nil)

// KillEnginePod deletes the replica's Pod with a zero grace period, as
// `kubectl delete pod --grace-period=0 --force` does: no preStop drain, the
// containers killed. Only a Pod of this deployment that is not a router is
// touched.
func (d *Deployment) KillEnginePod(ctx context.Context, r clusters.Replica) error {
	p, err := d.ownPod(ctx, r.Name)
	if err != nil {
		return fmt.Errorf("kill engine Pod: %w", err)
	}
	if _, router := p.Labels[api.LabelRouter]; router {
		return fmt.Errorf("kill engine Pod: %s/%s is a router Pod", d.ns, r.Name)
	}
	zero := int64(0)
	return d.deletePod(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// DeleteRouterPod deletes one router Pod of this deployment as `kubectl
// delete pod` does (its grace period, the router's SIGTERM drain).
func (d *Deployment) DeleteRouterPod(ctx context.Context, pod string) error {
	p, err := d.ownPod(ctx, pod)
	if err != nil {
		return fmt.Errorf("delete router Pod: %w", err)
	}
	if _, router := p.Labels[api.LabelRouter]; !router {
		return fmt.Errorf("delete router Pod: %s/%s is not a router Pod", d.ns, pod)
	}
	return d.deletePod(ctx, p, metav1.DeleteOptions{})
}

// InjectHTTPFault is not something a user of a cluster can do to an engine
// or a router without a chaos tool in the Pod's network, which the suite
// does not install: the claims that need it skip on kube with this reason.
func (d *Deployment) InjectHTTPFault(context.Context, string, clusters.HTTPFault) (func(), error) {
	return nil, fmt.Errorf("%w: making a Pod answer 5xx or hang needs a chaos tool in its network (e.g. Chaos Mesh HTTPChaos), which the kube target does not install", clusters.ErrFaultUnsupported)
}

// ownPod reads a Pod and checks it belongs to this deployment.
func (d *Deployment) ownPod(ctx context.Context, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, d.c.iv.Request)
	defer cancel()
	p, err := d.c.kube.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %s", d.ns, name, firstLine(err.Error()))
	}
	if p.Labels[api.LabelInstance] != d.name {
		return nil, fmt.Errorf("pod %s/%s does not belong to ModelDeployment %s", d.ns, name, d.name)
	}
	return p, nil
}

func (d *Deployment) deletePod(ctx context.Context, p *corev1.Pod, opts metav1.DeleteOptions) error {
	ctx, cancel := context.WithTimeout(ctx, d.c.iv.Request)
	defer cancel()
	uid := p.UID
	opts.Preconditions = &metav1.Preconditions{UID: &uid}
	if err := d.c.kube.CoreV1().Pods(d.ns).Delete(ctx, p.Name, opts); err != nil {
		return fmt.Errorf("delete pod %s/%s: %s", d.ns, p.Name, firstLine(err.Error()))
	}
	d.c.logf("kube: deleted pod %s/%s (grace period %v)", d.ns, p.Name, graceWords(opts.GracePeriodSeconds))
	return nil
}

func graceWords(g *int64) string {
	if g == nil {
		return "the Pod's own"
	}
	return fmt.Sprintf("%ds", *g)
}
