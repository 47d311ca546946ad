package clusters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
)

// readyMD is a routed one-role deployment whose status meets every gate.
func readyMD() *api.ModelDeployment {
	one := int32(1)
	return &api.ModelDeployment{
		Metadata: api.ObjectMeta{Name: "md", Namespace: "ns", Generation: 1},
		Spec: api.ModelDeploymentSpec{Router: &api.Router{Name: api.RouterVLLM},
			Roles: []api.Role{{Name: "server", Replicas: &one}}},
		Status: api.ModelDeploymentStatus{Phase: api.PhaseReady,
			Conditions: []api.Condition{{Type: api.ConditionRouterReady, Status: "True", Reason: api.ReasonReady, ObservedGeneration: 1}},
			Roles: []api.RoleStatus{{Name: "server", Desired: 1, Ready: 1,
				Endpoints: &api.RoleEndpoints{Serving: api.ServingState{State: api.ServingConfirmed, Value: &one}}}}},
	}
}

func routerDown(md *api.ModelDeployment, reason, msg string) *api.ModelDeployment {
	md.Status.Phase = api.PhaseDegraded
	md.Status.Conditions[0] = api.Condition{Type: api.ConditionRouterReady, Status: "False", Reason: reason, Message: msg}
	return md
}

func wait(t *testing.T, within time.Duration, w ReadyWait) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	w.Namespace, w.Name, w.Poll = "ns", "md", time.Millisecond
	return WaitReady(ctx, w)
}

func TestWaitReadyReturnsOnceNothingIsMissing(t *testing.T) {
	var reads atomic.Int32
	err := wait(t, 5*time.Second, ReadyWait{Get: func(context.Context) (*api.ModelDeployment, error) {
		if reads.Add(1) < 3 {
			return routerDown(readyMD(), api.ReasonNoReadyReplicas, "0 of 1 router replicas ready"), nil
		}
		return readyMD(), nil
	}})
	if err != nil || reads.Load() != 3 {
		t.Fatalf("WaitReady = %v after %d reads, want nil after 3", err, reads.Load())
	}
}

func TestWaitReadyTimeoutNamesTheLastGapAndWrapsTheDeadline(t *testing.T) {
	err := wait(t, 30*time.Millisecond, ReadyWait{Get: func(context.Context) (*api.ModelDeployment, error) {
		return routerDown(readyMD(), api.ReasonNoReadyReplicas, "0 of 1 router replicas ready"), nil
	}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error does not wrap the deadline: %v", err)
	}
	for _, want := range []string{"ModelDeployment ns/md not Ready", "phase is Degraded", "RouterReady=False/NoReadyReplicas: 0 of 1 router replicas ready"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

func TestWaitReadyKeepsReadingThroughGetErrors(t *testing.T) {
	err := wait(t, 30*time.Millisecond, ReadyWait{Get: func(context.Context) (*api.ModelDeployment, error) {
		return nil, errors.New("get ModelDeployment ns/md: etcdserver: request timed out\nretry later")
	}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "etcdserver: request timed out") || strings.Contains(err.Error(), "retry later") {
		t.Fatalf("WaitReady = %v, want the first line of the last read error and the deadline", err)
	}
	err = wait(t, 30*time.Millisecond, ReadyWait{Get: func(ctx context.Context) (*api.ModelDeployment, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no status was read") {
		t.Fatalf("WaitReady = %v, want 'no status was read'", err)
	}
}

func TestWaitReadyStopsAtOnceOnADeletedDeployment(t *testing.T) {
	gone := fmt.Errorf(`modeldeployments.worker.gpustack.ai "md" %w in namespace "ns"`, ErrNotFound)
	err := wait(t, 5*time.Second, ReadyWait{Get: func(context.Context) (*api.ModelDeployment, error) { return nil, gone }})
	if !errors.Is(err, ErrNotFound) || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), `"md" not found in namespace "ns"`) {
		t.Fatalf("WaitReady = %v", err)
	}
}

func TestWaitReadyStopsOnRenderFailedWithoutAHint(t *testing.T) {
	err := wait(t, 5*time.Second, ReadyWait{Get: func(context.Context) (*api.ModelDeployment, error) {
		return routerDown(readyMD(), api.ReasonRenderFailed, "every routed role must use the same serving port; got [8000 9000]"), nil
	}})
	if err == nil || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "cannot become Ready: the operator could not render the router: every routed role must use the same serving port") {
		t.Fatalf("WaitReady = %v", err)
	}
}

func TestWaitReadyAsksTheTargetsHintOnlyWhileSomethingIsMissing(t *testing.T) {
	var asked atomic.Int32
	stuck := func(_ context.Context, md *api.ModelDeployment) string {
		asked.Add(1)
		if md.Status.Phase == api.PhaseReady {
			t.Error("hint asked about a Ready deployment")
		}
		return "router Pod md-router-x is in CrashLoopBackOff, last exit code 2"
	}
	err := wait(t, 5*time.Second, ReadyWait{Stuck: stuck, Get: func(context.Context) (*api.ModelDeployment, error) {
		return routerDown(readyMD(), api.ReasonNoReadyReplicas, ""), nil
	}})
	if err == nil || errors.Is(err, context.DeadlineExceeded) || asked.Load() != 1 ||
		!strings.Contains(err.Error(), "ModelDeployment ns/md cannot become Ready: router Pod md-router-x is in CrashLoopBackOff, last exit code 2 (still missing: phase is Degraded") {
		t.Fatalf("WaitReady = %v (hint asked %d times)", err, asked.Load())
	}
	if err := wait(t, 5*time.Second, ReadyWait{Stuck: stuck, Get: func(context.Context) (*api.ModelDeployment, error) {
		return readyMD(), nil
	}}); err != nil {
		t.Fatal(err)
	}
}

type rolloutPod struct {
	name           string
	current, ready bool
}

// After an edit the readiness gate still holds through the old router
// Pod: WaitReady goes on until the target's Rollout check says the router
// runs only Ready Pods of the current args.
func TestWaitReadyWaitsForTheRouterRollout(t *testing.T) {
	var pods atomic.Value
	pods.Store([]rolloutPod{{"old", false, true}, {"new", true, true}})
	rollout := func(_ context.Context, md *api.ModelDeployment) string {
		return RolloutGap(md, pods.Load().([]rolloutPod), func(p rolloutPod) (string, bool, bool) { return p.name, p.current, p.ready })
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		pods.Store([]rolloutPod{{"new", true, true}})
	}()
	start := time.Now()
	if err := wait(t, 5*time.Second, ReadyWait{Rollout: rollout, Get: func(context.Context) (*api.ModelDeployment, error) { return readyMD(), nil }}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("WaitReady returned after %v, while the old router Pod still served", time.Since(start))
	}
}

func TestRolloutGapNamesWhatTheRolloutLacks(t *testing.T) {
	md := readyMD()
	md.Spec.Router.Replicas = api.Ptr[int32](2)
	for _, tc := range []struct {
		pods []rolloutPod
		want string
	}{
		{[]rolloutPod{{"a", true, true}, {"b", true, true}}, ""},
		{[]rolloutPod{{"a", true, true}, {"b", true, false}}, "router Pod b of the current router args is not Ready"},
		{[]rolloutPod{{"a", true, true}}, "1 of 2 router Pods of the current router args exist"},
		{[]rolloutPod{{"a", true, true}, {"b", true, true}, {"old", false, true}}, "router Pod old of earlier router args is still serving"},
	} {
		got := RolloutGap(md, tc.pods, func(p rolloutPod) (string, bool, bool) { return p.name, p.current, p.ready })
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.pods, got, tc.want)
		}
	}
}
