package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpustack/routing-conformance/api"
)

// WaitReady polls the status every poll until phase is Ready, RouterReady is
// True (when a router is declared) and every role's endpoints.serving is
// Confirmed with value == desired (a successful answer alone does not prove
// the router registered every replica: docs/operator.md#gotchas). The suite bounds it
// with ctx (e2e.yaml wait-model-ready). It stops early on states that will
// not heal by waiting: a router crash-looping with exit code 2 (its argument
// parser refused a flag), an image that cannot be pulled, or a router render
// refusal. Every error says what was last missing.
func (d *Deployment) WaitReady(ctx context.Context, poll time.Duration) error {
	if poll <= 0 {
		poll = d.c.iv.Poll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var missing []string
	for {
		md, err := d.Object(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return d.notReady(ctx, missing)
			}
			missing = []string{firstLine(err.Error())}
		} else {
			missing = api.ReadinessGaps(md)
			if len(missing) == 0 {
				return nil
			}
			if reason := d.terminal(ctx, md); reason != "" {
				return fmt.Errorf("ModelDeployment %s/%s cannot become Ready: %s (still missing: %s)", d.ns, d.name, reason, strings.Join(missing, "; "))
			}
		}
		select {
		case <-ctx.Done():
			return d.notReady(ctx, missing)
		case <-t.C:
		}
	}
}

func (d *Deployment) notReady(ctx context.Context, missing []string) error {
	if len(missing) == 0 {
		missing = []string{"no status was read"}
	}
	return fmt.Errorf("ModelDeployment %s/%s not Ready: %s (%w)", d.ns, d.name, strings.Join(missing, "; "), ctx.Err())
}

// Waiting reasons that do not heal by waiting longer.
var stuckReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
}

// terminal returns why md can never become Ready as it stands, or "".
func (d *Deployment) terminal(ctx context.Context, md *api.ModelDeployment) string {
	if c := md.Status.FindCondition(api.ConditionRouterReady); c != nil && c.Status == "False" && c.Reason == api.ReasonRenderFailed {
		return fmt.Sprintf("the operator could not render the router: %s", c.Message)
	}
	pods, err := d.pods(ctx, instanceSelector(d.name))
	if err != nil {
		return "" // a failed list is not a verdict; the next poll retries
	}
	var refused []string
	routers := 0
	for i := range pods {
		p := &pods[i]
		if r := podTerminal(p); r != "" {
			return r
		}
		if _, isRouter := p.Labels[api.LabelRouter]; isRouter && p.DeletionTimestamp == nil {
			routers++
			if r := refusedArgs(p); r != "" {
				refused = append(refused, r)
			}
		}
	}
	// One good router Pod beside a refusing one is a rollout in progress (an
	// edit that fixed the arguments while the old Pod still crashes), which
	// waiting resolves; only when every router Pod refuses is it final.
	if routers > 0 && len(refused) == routers {
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
