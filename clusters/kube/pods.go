package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// Pods are always found by label, never by name: engine Pods are
// generateName'd and router Pods come from a ReplicaSet (docs/operator.md#finding-things-in-a-cluster).

func instanceSelector(md string) string {
	return labels.SelectorFromSet(labels.Set{api.LabelInstance: md}).String()
}

// routerSelector is case-94's recipe: instance=<md>,router=<router name>.
// With no router name known, any Pod carrying the router label.
func routerSelector(md, router string) string {
	if router == "" {
		return api.LabelInstance + "=" + md + "," + api.LabelRouter
	}
	return labels.SelectorFromSet(labels.Set{api.LabelInstance: md, api.LabelRouter: router}).String()
}

// pods lists the namespace's Pods matching selector, sorted by name.
func (d *Deployment) pods(ctx context.Context, selector string) ([]corev1.Pod, error) {
	list, err := d.c.kube.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list Pods %s in %s: %s", selector, d.ns, firstLine(err.Error()))
	}
	out := list.Items
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// routerPods are the router Pods not being deleted (a rollout's old Pod is
// on its way out and is no longer what the Service sends traffic to).
func (d *Deployment) routerPods(ctx context.Context) ([]corev1.Pod, error) {
	all, err := d.pods(ctx, routerSelector(d.name, d.router()))
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, p := range all {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// routerContainer is the container that runs the router program: "router"
// for vllm-router and sglang-gateway, "epp" for llm-d-router.
func routerContainer(p *corev1.Pod) string {
	for _, name := range []string{api.ContainerRouter, api.ContainerEPP} {
		for _, c := range p.Spec.Containers {
			if c.Name == name {
				return name
			}
		}
	}
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return api.ContainerRouter
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// RouterState describes every router Pod not being deleted, sorted by name.
func (d *Deployment) RouterState(ctx context.Context) ([]clusters.RouterPod, error) {
	pods, err := d.routerPods(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]clusters.RouterPod, 0, len(pods))
	for i := range pods {
		out = append(out, routerPodState(&pods[i]))
	}
	return out, nil
}

func routerPodState(p *corev1.Pod) clusters.RouterPod {
	rp := clusters.RouterPod{Name: p.Name, UID: string(p.UID), IP: p.Status.PodIP, Ready: podReady(p)}
	cs := containerStatus(p, routerContainer(p))
	if cs == nil {
		return rp
	}
	rp.Restarts = cs.RestartCount
	if cs.State.Waiting != nil {
		rp.Waiting = cs.State.Waiting.Reason
	}
	switch {
	case cs.State.Terminated != nil:
		code := cs.State.Terminated.ExitCode
		rp.LastExitCode = &code
		if rp.Waiting == "" {
			rp.Waiting = cs.State.Terminated.Reason
		}
	case cs.LastTerminationState.Terminated != nil:
		code := cs.LastTerminationState.Terminated.ExitCode
		rp.LastExitCode = &code
	}
	return rp
}

// roleSelector is one role's discovery selector.
type roleSelector struct {
	role, kind string
	selector   map[string]string
}

// selectors reads the exact label equalities the router discovers by from
// status.router.roles[].selector (the eligibility label key changed across
// operator versions, so it is never hard-coded); without a router status,
// a role's Pods are instance=<md>,component=<role>.
func selectors(md *api.ModelDeployment) []roleSelector {
	var out []roleSelector
	if md.Status.Router != nil && len(md.Status.Router.Roles) > 0 {
		for _, rr := range md.Status.Router.Roles {
			if len(rr.Selector) == 0 {
				continue
			}
			out = append(out, roleSelector{role: rr.Name, kind: rr.Kind, selector: rr.Selector})
		}
		if len(out) > 0 {
			return out
		}
	}
	for _, r := range md.Spec.Roles {
		out = append(out, roleSelector{role: r.Name, kind: r.RoleKind(), selector: map[string]string{
			api.LabelInstance: md.Metadata.Name, api.LabelComponent: r.Name,
		}})
	}
	return out
}

// Replicas lists the engine replicas the router can see: leader Pods
// (member-index 0 or unset) that are Running, Ready and not being deleted,
// found through the roles' selectors, sorted by Pod name.
func (d *Deployment) Replicas(ctx context.Context) ([]clusters.Replica, error) {
	md, err := d.Object(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []clusters.Replica
	for _, rs := range selectors(md) {
		pods, err := d.pods(ctx, labels.SelectorFromSet(rs.selector).String())
		if err != nil {
			return nil, err
		}
		for i := range pods {
			p := &pods[i]
			if seen[p.Name] || !podReady(p) || p.Status.PodIP == "" {
				continue
			}
			if _, isRouter := p.Labels[api.LabelRouter]; isRouter {
				continue
			}
			if m, ok := p.Labels[api.LabelMember]; ok && m != "0" {
				continue
			}
			seen[p.Name] = true
			out = append(out, d.replica(md, rs, p))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (d *Deployment) replica(md *api.ModelDeployment, rs roleSelector, p *corev1.Pod) clusters.Replica {
	r := clusters.Replica{Name: p.Name, UID: string(p.UID), Role: p.Labels[api.LabelComponent], Kind: rs.kind, IP: p.Status.PodIP}
	if r.Role == "" {
		r.Role = rs.role
	}
	if k := p.Labels[api.LabelRoleKind]; k != "" {
		r.Kind = kindFromLabel(k)
	}
	r.Port = servingPort(p)
	r.MetricsPort = promPort(p, r.Port)
	for _, c := range p.Spec.Containers {
		if c.Name == api.ContainerEngine {
			d.c.sawEngineImage(md.Spec.Engine.Name, c.Image)
		}
	}
	return r
}

// kindFromLabel maps the role-kind label (server|prefill|decode) to the
// spec's spelling (Server|Prefill|Decode).
func kindFromLabel(v string) string {
	for _, k := range api.RoleKinds {
		if strings.EqualFold(k, v) {
			return k
		}
	}
	return v
}

// servingPort is the port the router dials: the port named "http" (the
// engine's, or the routing-proxy sidecar's on an llm-d decoder), else 8000.
func servingPort(p *corev1.Pod) int {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			for _, port := range c.Ports {
				if port.Name == "http" && port.ContainerPort > 0 {
					return int(port.ContainerPort)
				}
			}
		}
	}
	return api.EngineDefaultPort
}
