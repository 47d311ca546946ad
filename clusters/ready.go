package clusters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/api"
)

// ErrNotFound is wrapped by a target's error for a deployment that no longer
// exists: WaitReady stops at once on it.
var ErrNotFound = errors.New("not found")

// ReadyWait is one wait for WaitReady: how to read the deployment, and the
// target's hint for a state that waiting cannot fix.
type ReadyWait struct {
	// Namespace and Name name the deployment in messages.
	Namespace, Name string
	// Get reads the live object. An error is what is missing for now (the
	// next poll reads again), unless it wraps ErrNotFound.
	Get func(ctx context.Context) (*api.ModelDeployment, error)
	// Stuck, if set, names a state of md that waiting cannot fix (a router
	// that refuses its arguments, an image that cannot be pulled), or ""
	// while waiting may still help. It may read more than md (Pods); a read
	// that fails is no verdict.
	Stuck func(ctx context.Context, md *api.ModelDeployment) string
	// Rollout, if set, names what the router rollout still lacks ("" once
	// it is over): Ready means the router Pods run the spec's router args,
	// not only that some router Pod is Ready. Right after an edit of
	// spec.router.extraArgs the operator's readiness gate still holds
	// through the old router Pod (RouterReady counts the Deployment's ready
	// replicas, docs/operator.md#router-rollout-and-the-router-service), so
	// without this a wait after an edit returned while the old Pod served.
	Rollout func(ctx context.Context, md *api.ModelDeployment) string
	// Poll is the pause between two reads.
	Poll time.Duration
	// Router, if set, is read when the wait fails: the end of the router
	// container's log joins the error (withRouterLog), so a router that
	// exits or never serves says why in the failure itself.
	Router RouterLogReader
}

// RouterLogReader is the part of a Deployment a failed wait quotes.
type RouterLogReader interface {
	RouterState(ctx context.Context) ([]RouterPod, error)
	RouterLogs(ctx context.Context, opts LogOptions) (string, error)
}

// WaitReady polls w.Get every w.Poll until api.ReadinessGaps finds nothing
// missing and the router rollout is over (w.Rollout), ctx ends, or the
// deployment is stuck for good: the operator
// could not render its router (RouterReady False/RenderFailed), or w.Stuck
// names a reason. Both targets wait through it, so "Ready" and "stuck" mean
// the same on each. Every error names what was last missing; one that ends
// with ctx wraps ctx.Err(), and carries the end of the router's log when
// w.Router is set.
func WaitReady(ctx context.Context, w ReadyWait) error {
	err := w.wait(ctx)
	if w.Router == nil {
		return err
	}
	return withRouterLog(err, w.Router)
}

func (w ReadyWait) wait(ctx context.Context) error {
	poll := w.Poll
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var missing []string
	for {
		md, err := w.Get(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return w.notReady(ctx, missing)
		case errors.Is(err, ErrNotFound):
			return fmt.Errorf("ModelDeployment %s/%s cannot become Ready: %w", w.Namespace, w.Name, err)
		case err != nil:
			missing = []string{firstLine(err.Error())}
		default:
			missing = api.ReadinessGaps(md)
			if len(missing) == 0 && w.Rollout != nil {
				if gap := w.Rollout(ctx, md); gap != "" {
					missing = []string{gap}
				}
			}
			if len(missing) == 0 {
				return nil
			}
			reason := renderFailed(md)
			if reason == "" && w.Stuck != nil {
				reason = w.Stuck(ctx, md)
			}
			if reason != "" {
				return fmt.Errorf("ModelDeployment %s/%s cannot become Ready: %s (still missing: %s)",
					w.Namespace, w.Name, reason, strings.Join(missing, "; "))
			}
		}
		select {
		case <-ctx.Done():
			return w.notReady(ctx, missing)
		case <-t.C:
		}
	}
}

func (w ReadyWait) notReady(ctx context.Context, missing []string) error {
	if len(missing) == 0 {
		missing = []string{"no status was read"}
	}
	return fmt.Errorf("ModelDeployment %s/%s not Ready: %s (%w)", w.Namespace, w.Name, strings.Join(missing, "; "),
		ctx.Err())
}

// renderFailed is the operator's own verdict that the router cannot be
// rendered from this spec (docs/operator.md#conditions): no Pod will ever come.
func renderFailed(md *api.ModelDeployment) string {
	c := md.Status.FindCondition(api.ConditionRouterReady)
	if c != nil && c.Status == "False" && c.Reason == api.ReasonRenderFailed {
		return "the operator could not render the router: " + c.Message
	}
	return ""
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// RolloutGap is the Rollout check on a target's live router Pods (not
// terminating): pod reads one as its name, whether it runs the current
// router template and whether it is Ready. It names an old Pod still
// live, or a current one missing or not Ready; "" when the router runs
// spec.router.replicas Ready Pods of the current template and nothing else.
func RolloutGap[P any](md *api.ModelDeployment, pods []P, pod func(P) (name string, current, ready bool)) string {
	want := int(md.Spec.Router.RouterReplicas())
	var old, notReady []string
	current := 0
	for _, p := range pods {
		name, cur, ready := pod(p)
		switch {
		case !cur:
			old = append(old, name)
		case !ready:
			current++
			notReady = append(notReady, name)
		default:
			current++
		}
	}
	switch {
	case len(notReady) > 0:
		return fmt.Sprintf("router rollout: router Pod %s of the current router args is not Ready", strings.Join(notReady, ", "))
	case current < want:
		return fmt.Sprintf("router rollout: %d of %d router Pods of the current router args exist", current, want)
	case len(old) > 0:
		return fmt.Sprintf("router rollout: router Pod %s of earlier router args is still serving", strings.Join(old, ", "))
	}
	return ""
}
