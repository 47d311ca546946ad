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
// the router registered every replica: operator.md §11). The suite bounds it
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
			missing = readinessGaps(md)
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

// readinessGaps lists every readiness condition md does not meet yet.
func readinessGaps(md *api.ModelDeployment) []string {
	var gaps []string
	st := md.Status
	if st.ObservedGeneration != 0 && st.ObservedGeneration < md.Metadata.Generation {
		gaps = append(gaps, fmt.Sprintf("status describes generation %d, spec is at %d", st.ObservedGeneration, md.Metadata.Generation))
	}
	if st.Phase != api.PhaseReady {
		g := fmt.Sprintf("phase is %s, want %s", orNone(st.Phase), api.PhaseReady)
		if st.PhaseMessage != "" {
			g += ": " + st.PhaseMessage
		}
		gaps = append(gaps, g)
	}
	routed := md.Spec.Router != nil
	if routed {
		c := st.FindCondition(api.ConditionRouterReady)
		switch {
		case c == nil:
			gaps = append(gaps, "condition RouterReady not reported")
		case c.Status != "True":
			g := fmt.Sprintf("RouterReady=%s/%s", c.Status, c.Reason)
			if c.Message != "" {
				g += ": " + c.Message
			}
			gaps = append(gaps, g)
		}
	}
	for _, r := range md.Spec.Roles {
		rs := findRoleStatus(st.Roles, r.Name)
		if rs == nil {
			gaps = append(gaps, fmt.Sprintf("role %s: no status yet", r.Name))
			continue
		}
		desired := rs.Desired
		if desired == 0 {
			desired = r.RoleReplicas()
		}
		if rs.Ready < desired {
			gaps = append(gaps, fmt.Sprintf("role %s: %d of %d instances ready", r.Name, rs.Ready, desired))
		}
		switch {
		case rs.Endpoints == nil:
			gaps = append(gaps, fmt.Sprintf("role %s: endpoints.serving not reported", r.Name))
		case !routed && rs.Endpoints.Serving.State == api.ServingNotConfigured:
			// Without a router nothing serves a routing view to confirm.
		case rs.Endpoints.Serving.State != api.ServingConfirmed:
			gaps = append(gaps, fmt.Sprintf("role %s: endpoints.serving.state is %s, want %s", r.Name, orNone(rs.Endpoints.Serving.State), api.ServingConfirmed))
		case rs.Endpoints.Serving.Value == nil:
			gaps = append(gaps, fmt.Sprintf("role %s: endpoints.serving is Confirmed without a value", r.Name))
		case *rs.Endpoints.Serving.Value != desired:
			gaps = append(gaps, fmt.Sprintf("role %s: the router serves %d endpoints, want %d", r.Name, *rs.Endpoints.Serving.Value, desired))
		}
	}
	if c := st.FindCondition(api.ConditionQuotaReserved); len(gaps) > 0 && c != nil && c.Status != "True" {
		// Not a readiness condition of its own, but the reason Pods are not
		// even scheduled (no LocalQueue, quota taken): say it.
		g := fmt.Sprintf("QuotaReserved=%s/%s", c.Status, c.Reason)
		if c.Message != "" {
			g += ": " + c.Message
		}
		gaps = append(gaps, g)
	}
	return gaps
}

func findRoleStatus(roles []api.RoleStatus, name string) *api.RoleStatus {
	for i := range roles {
		if roles[i].Name == name {
			return &roles[i]
		}
	}
	return nil
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
	for i := range pods {
		if r := podTerminal(&pods[i]); r != "" {
			return r
		}
	}
	return ""
}

// podTerminal reports a Pod state that waiting will not fix.
func podTerminal(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return ""
	}
	_, isRouter := p.Labels[api.LabelRouter]
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		if stuckReasons[w.Reason] {
			return fmt.Sprintf("Pod %s container %s is %s: %s", p.Name, cs.Name, w.Reason, firstLine(w.Message))
		}
		if isRouter && w.Reason == "CrashLoopBackOff" && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 2 {
			return fmt.Sprintf("router Pod %s container %s is in CrashLoopBackOff, last exit code 2 (the router refused its arguments, e.g. an unknown --policy; its previous log has the error)", p.Name, cs.Name)
		}
	}
	return ""
}
