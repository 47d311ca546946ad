package sim

import (
	"context"
	"fmt"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/sim/proc"
)

var _ clusters.FaultInjector = (*deployment)(nil)

// KillEnginePod kills the replica's Pod with a zero grace period (see
// kubelet.Kill); the controller replaces it as the operator does.
func (d *deployment) KillEnginePod(ctx context.Context, r clusters.Replica) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, ok := d.kube.Get(d.namespace, r.Name)
	if !ok || p.Labels[api.LabelInstance] != d.name {
		return fmt.Errorf("kill engine Pod: pods %q not found in namespace %q for %s", r.Name, d.namespace, d.name)
	}
	if _, router := p.Labels[api.LabelRouter]; router {
		return fmt.Errorf("kill engine Pod: %s is a router Pod", r.Name)
	}
	d.kube.Kill(d.namespace, r.Name)
	return nil
}

// DeleteRouterPod deletes one router Pod gracefully, as kubectl delete pod
// does; the router Deployment's ReplicaSet replaces it.
func (d *deployment) DeleteRouterPod(ctx context.Context, pod string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, ok := d.kube.Get(d.namespace, pod)
	if _, router := p.Labels[api.LabelRouter]; !ok || !router || p.Labels[api.LabelInstance] != d.name {
		return fmt.Errorf("delete router Pod: %s is not a router Pod of %s in namespace %q", pod, d.name, d.namespace)
	}
	d.kube.Delete(d.namespace, pod)
	return nil
}

// InjectHTTPFault arms f on one of the deployment's Pods (see
// proc.HTTPFault).
func (d *deployment) InjectHTTPFault(ctx context.Context, pod string, f clusters.HTTPFault) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p, ok := d.kube.Get(d.namespace, pod); !ok || p.Labels[api.LabelInstance] != d.name {
		return nil, fmt.Errorf("inject HTTP fault: pods %q of %s not found in namespace %q", pod, d.name, d.namespace)
	}
	return d.kube.InjectHTTPFault(d.namespace, pod, proc.HTTPFault{Port: f.Port, PathPrefix: f.PathPrefix,
		Status: f.Status, Body: f.Body, Hang: f.Hang})
}
