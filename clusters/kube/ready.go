package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// WaitReady waits through clusters.WaitReady (phase Ready, RouterReady
// True when a router is declared, every role's endpoints.serving Confirmed
// at its desired count; docs/operator.md#gotchas), and for the router
// rollout to be over: only Ready router Pods of the router args last
// written are left (rollout.go). The suite bounds it with ctx (e2e.yaml
// wait-ready); poll <= 0 is Intervals.Poll. It stops early on a router
// render refusal and on what stuck finds on the Pods.
func (d *Deployment) WaitReady(ctx context.Context, poll time.Duration) error {
	if poll <= 0 {
		poll = d.c.iv.Poll
	}
	return clusters.WaitReady(ctx, clusters.ReadyWait{Namespace: d.ns, Name: d.name, Get: d.Object,
		Stuck: d.stuck, Rollout: d.rollout, Poll: poll, Router: d})
}

// Waiting reasons that do not heal by waiting longer.
var stuckReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
}

// stuck is kube's hint to clusters.WaitReady: why the deployment's Pods can
// never make it Ready as they stand (an image that cannot be pulled, a
// container config error, every router Pod of the args last written
// refusing them), or "".
func (d *Deployment) stuck(ctx context.Context, _ *api.ModelDeployment) string {
	pods, err := d.pods(ctx, instanceSelector(d.name))
	if err != nil {
		return "" // a failed list is not a verdict; the next poll retries
	}
	var routerPods []corev1.Pod
	for i := range pods {
		p := &pods[i]
		if r := podTerminal(p); r != "" {
			return r
		}
		if _, isRouter := p.Labels[api.LabelRouter]; isRouter && p.DeletionTimestamp == nil {
			routerPods = append(routerPods, *p)
		}
	}
	// Only the router Pods of the args last written count: an older Pod
	// that still crashes right after an edit that fixed the arguments goes
	// with the rollout, and a good older Pod beside a new one that refuses
	// its arguments (a failed rollout) never makes the new args Ready.
	var refused []string
	current := 0
	for _, p := range d.currentRouterPods(routerPods) {
		if !p.current {
			continue
		}
		current++
		if r := refusedArgs(p.pod); r != "" {
			refused = append(refused, r)
		}
	}
	if current > 0 && len(refused) == current {
		return refused[0]
	}
	return ""
}

// refusedArgs reports a router container crash-looping with exit code 2,
// clap's code for an argument it refused.
func refusedArgs(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w != nil && w.Reason == "CrashLoopBackOff" && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 2 {
			return fmt.Sprintf("router Pod %s container %s is in CrashLoopBackOff, last exit code 2 (the router refused its arguments, e.g. an unknown --policy; its previous log has the error)", p.Name, cs.Name)
		}
	}
	return ""
}

// podTerminal reports a Pod state that waiting will not fix.
func podTerminal(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return ""
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		if stuckReasons[w.Reason] {
			return fmt.Sprintf("Pod %s container %s is %s: %s", p.Name, cs.Name, w.Reason, firstLine(w.Message))
		}
	}
	return ""
}
