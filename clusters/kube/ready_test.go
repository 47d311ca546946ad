package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/api"
)

// deployed creates twoServerMD in a fresh namespace and returns it.
func deployed(t *testing.T, e *fakeEnv, name string) *Deployment {
	t.Helper()
	dep, err := e.cluster.Deploy(context.Background(), twoServerMD(name))
	if err != nil {
		t.Fatal(err)
	}
	return dep.(*Deployment)
}

func TestWaitReadySucceedsOnceEveryConditionHolds(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// The operator moves through Starting -> router ready, serving not
	// converged -> Ready, as it does on a cluster.
	starting := api.ModelDeploymentStatus{Phase: api.PhaseStarting, PhaseMessage: "0 of 2 instances ready",
		Roles: []api.RoleStatus{{Name: "server", Desired: 2}}}
	e.setStatus(d.ns, d.name, starting, 0)
	done := make(chan error, 1)
	go func() { done <- d.WaitReady(ctx, 5*time.Millisecond) }()

	converging := readyStatus(d.name, true, 2)
	converging.Roles[0].Endpoints.Serving = api.ServingState{State: api.ServingNotConverged}
	e.setStatus(d.ns, d.name, converging, 0)
	select {
	case err := <-done:
		t.Fatalf("WaitReady returned before serving was Confirmed: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	e.setStatus(d.ns, d.name, readyStatus(d.name, true, 2), 0)
	select {
	case err := <-done:
		t.Fatalf("WaitReady returned before a router Pod ran: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	e.addPod(routerPod(d.ns, d.name, "md-router-abc", "u1"))
	if err := <-done; err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

func TestWaitReadyTimeoutSaysWhatWasLastMissing(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	for _, tc := range []struct {
		name   string
		status func() api.ModelDeploymentStatus
		gen    int64
		wants  []string
	}{
		{"no status", func() api.ModelDeploymentStatus { return api.ModelDeploymentStatus{} },
			0, []string{"phase is <none>, want Ready", "condition RouterReady not reported", "role server: no status yet"}},
		{"router not ready", func() api.ModelDeploymentStatus {
			s := readyStatus(d.name, true, 2)
			s.Phase, s.PhaseMessage = api.PhaseDegraded, "all roles ready but the router has no ready replica"
			s.Conditions[0] = api.Condition{Type: api.ConditionRouterReady, Status: "False", Reason: api.ReasonNoReadyReplicas, Message: "0 of 1 router replicas ready"}
			return s
		}, 0, []string{"phase is Degraded", "no ready replica", "RouterReady=False/NoReadyReplicas: 0 of 1 router replicas ready"}},
		{"no quota", func() api.ModelDeploymentStatus {
			return api.ModelDeploymentStatus{Phase: api.PhaseStarting, Conditions: []api.Condition{{Type: api.ConditionQuotaReserved,
				Status: "False", Reason: "Pending", Message: `the group of 2 replicas is waiting for quota in cluster queue "h20"`}}}
		}, 0, []string{"phase is Starting", `QuotaReserved=False/Pending: the group of 2 replicas is waiting for quota in cluster queue "h20"`}},
		{"serving short", func() api.ModelDeploymentStatus {
			s := readyStatus(d.name, true, 2)
			s.Roles[0].Endpoints.Serving.Value = api.Ptr(int32(1))
			return s
		}, 0, []string{"role server: the router serves 1 endpoints, want 2"}},
		{"serving unknown", func() api.ModelDeploymentStatus {
			s := readyStatus(d.name, true, 2)
			s.Roles[0].Endpoints.Serving = api.ServingState{State: api.ServingUnknown}
			return s
		}, 0, []string{"endpoints.serving.state is Unknown, want Confirmed"}},
		{"stale generation", func() api.ModelDeploymentStatus {
			// The operator's status has no observedGeneration of its own; its
			// conditions carry the generation they describe.
			s := readyStatus(d.name, true, 2)
			for i := range s.Conditions {
				s.Conditions[i].ObservedGeneration = 1
			}
			return s
		}, 2, []string{"status describes generation 1, spec is at 2"}},
	} {
		e.setStatus(d.ns, d.name, tc.status(), tc.gen)
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
		err := d.WaitReady(ctx, 5*time.Millisecond)
		cancel()
		if err == nil {
			t.Errorf("%s: WaitReady succeeded", tc.name)
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error does not wrap the deadline: %v", tc.name, err)
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
}

func TestWaitReadyStopsEarlyOnRouterExit2(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	s := readyStatus(d.name, true, 2)
	s.Conditions[0] = api.Condition{Type: api.ConditionRouterReady, Status: "False", Reason: api.ReasonNoReadyReplicas}
	e.setStatus(d.ns, d.name, s, 0)
	e.addPod(routerPod(d.ns, d.name, "md-router-abc", "u1", crashLooping(2)))
	start := time.Now()
	err := waitReadyBounded(d)
	if err == nil || !strings.Contains(err.Error(), "CrashLoopBackOff, last exit code 2") || !strings.Contains(err.Error(), "md-router-abc") {
		t.Fatalf("WaitReady = %v", err)
	}
	t.Logf("returned after %v: %v", time.Since(start), err)
}

// After an edit that fixes the router's arguments the old Pod still crashes
// beside the new one: that is a rollout in progress, not a final state.
func TestWaitReadyKeepsWaitingWhileAGoodRouterPodRollsOut(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	s := readyStatus(d.name, true, 2)
	s.Conditions[0] = api.Condition{Type: api.ConditionRouterReady, Status: "False", Reason: api.ReasonNoReadyReplicas}
	e.setStatus(d.ns, d.name, s, 0)
	e.addPod(routerPod(d.ns, d.name, "md-router-old", "u1", crashLooping(2)))
	d.currentRouterPods(mustRouterPods(t, d)) // the old Pod runs the args it was created with
	d.revisions.wrote([]string{"--policy", "round_robin"})
	e.addPod(routerPod(d.ns, d.name, "md-router-new", "u2"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := d.WaitReady(ctx, 5*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "RouterReady=False") {
		t.Fatalf("WaitReady = %v, want it to keep waiting until its deadline and name RouterReady", err)
	}
}

// waitReadyBounded runs WaitReady under a deadline far longer than an early
// stop takes; a stop by the deadline is a failure of the early stop.
func waitReadyBounded(d *Deployment) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := d.WaitReady(ctx, 5*time.Millisecond)
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("did not stop early: " + err.Error())
	}
	return err
}

func TestWaitReadyKeepsWaitingOnOtherCrashes(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.setStatus(d.ns, d.name, api.ModelDeploymentStatus{Phase: api.PhaseStarting}, 0)
	e.addPod(routerPod(d.ns, d.name, "md-router-abc", "u1", crashLooping(137))) // OOM-killed: may heal
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer cancel()
	if err := d.WaitReady(ctx, 5*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady = %v, want a timeout", err)
	}
}

func TestWaitReadyStopsEarlyOnImagePullBackOff(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.setStatus(d.ns, d.name, api.ModelDeploymentStatus{Phase: api.PhaseStarting}, 0)
	e.addPod(enginePod(d.ns, d.name, "md-server-x1", "10.0.1.1", func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: `Back-off pulling image "gpustack/runner:cuda12.9-vllm9.9.9"`}}
	}))
	err := waitReadyBounded(d)
	if err == nil || !strings.Contains(err.Error(), "md-server-x1 container main is ImagePullBackOff") || !strings.Contains(err.Error(), "vllm9.9.9") {
		t.Fatalf("WaitReady = %v", err)
	}
}

func TestWaitReadyStopsEarlyOnRenderFailed(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.setStatus(d.ns, d.name, api.ModelDeploymentStatus{Phase: api.PhaseDegraded, Conditions: []api.Condition{{
		Type: api.ConditionRouterReady, Status: "False", Reason: api.ReasonRenderFailed, Message: "every routed role must use the same serving port; got [8000 9000]"}}}, 0)
	err := waitReadyBounded(d)
	if err == nil || !strings.Contains(err.Error(), "could not render the router: every routed role must use the same serving port") {
		t.Fatalf("WaitReady = %v", err)
	}
}

func TestWaitReadyWithoutRouterAcceptsNotConfigured(t *testing.T) {
	// QuotaReserved is reported only as a reason, never blocks a Ready deployment.
	ready := &api.ModelDeployment{Metadata: api.ObjectMeta{Name: "r"}, Spec: twoServerMD("r").Spec, Status: readyStatus("r", true, 2)}
	ready.Status.Conditions = append(ready.Status.Conditions, api.Condition{Type: api.ConditionQuotaReserved, Status: "Unknown", Reason: "AdmissionInFlight"})
	if gaps := api.ReadinessGaps(ready); len(gaps) != 0 {
		t.Errorf("Ready deployment with QuotaReserved Unknown has gaps %v", gaps)
	}

	md := &api.ModelDeployment{Metadata: api.ObjectMeta{Name: "plain", Generation: 1}, Spec: api.ModelDeploymentSpec{Roles: []api.Role{{Name: "server"}}}}
	st := readyStatus("plain", false, 1)
	st.Roles[0].Endpoints.Serving = api.ServingState{State: api.ServingNotConfigured}
	md.Status = st
	if gaps := api.ReadinessGaps(md); len(gaps) != 0 {
		t.Errorf("gaps %v", gaps)
	}
	md.Spec.Router = &api.Router{Name: api.RouterVLLM}
	if gaps := api.ReadinessGaps(md); len(gaps) == 0 {
		t.Error("a routed deployment with serving NotConfigured counted as ready")
	}
}

func TestRouterPodsAreFoundByLabelsOnly(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	e.addPod(routerPod(d.ns, d.name, "md-router-b", "u2", crashLooping(2)))
	e.addPod(routerPod(d.ns, "other", "md-router-c", "u3"))                     // another deployment
	e.addPod(routerPod(d.ns, d.name, "looks-unrelated", "u4"))                  // named oddly, labelled right
	e.addPod(routerPod(d.ns, d.name, "md-router-old", "u5", deleting()))        // a rollout's old Pod
	e.addPod(enginePod(d.ns, d.name, "md-router-engine-lookalike", "10.0.1.1")) // name says router, labels do not
	got, err := d.RouterState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "looks-unrelated,md-router-a,md-router-b" {
		t.Fatalf("router Pods %v", names)
	}
	b := got[2]
	if b.Ready || b.Restarts != 3 || b.Waiting != "CrashLoopBackOff" || b.LastExitCode == nil || *b.LastExitCode != 2 || b.UID != "u2" {
		t.Errorf("crash-looping router state %+v", b)
	}
	if a := got[1]; !a.Ready || a.IP != "10.0.0.9" || a.LastExitCode != nil {
		t.Errorf("healthy router state %+v", a)
	}
}

func deleting() podOpt {
	return func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Finalizers = []string{"test/keep"}
	}
}

func TestReplicasFollowTheRoutersSelector(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	st := readyStatus(d.name, true, 2)
	st.Router.Roles[0].Selector["example.gpustack.ai/eligible"] = "true" // whatever key the operator publishes
	e.setStatus(d.ns, d.name, st, 0)
	eligible := func(p *corev1.Pod) { p.Labels["example.gpustack.ai/eligible"] = "true" }
	e.addPod(enginePod(d.ns, d.name, "md-server-b", "10.0.1.2", eligible))
	e.addPod(enginePod(d.ns, d.name, "md-server-a", "10.0.1.1", eligible, func(p *corev1.Pod) {
		p.Annotations[api.AnnotationPromPort] = "8200"
	}))
	e.addPod(enginePod(d.ns, d.name, "md-server-c", "10.0.1.3"))                                // not eligible: the router ignores it
	e.addPod(enginePod(d.ns, d.name, "md-server-d", "10.0.1.4", eligible, func(p *corev1.Pod) { // member 1 of a multi-Pod instance
		p.Labels[api.LabelMember] = "1"
	}))
	e.addPod(enginePod(d.ns, d.name, "md-server-e", "10.0.1.5", eligible, func(p *corev1.Pod) { // not ready yet
		p.Status.Conditions[0].Status = corev1.ConditionFalse
	}))
	reps, err := d.Replicas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].Name != "md-server-a" || reps[1].Name != "md-server-b" {
		t.Fatalf("replicas %+v", reps)
	}
	a := reps[0]
	if a.Role != "server" || a.Kind != api.RoleKindServer || a.IP != "10.0.1.1" || a.Port != 8000 || a.MetricsPort != 8200 || a.URL() != "http://10.0.1.1:8000" {
		t.Errorf("replica %+v", a)
	}
	env, _ := e.cluster.Describe(context.Background())
	if env.EngineImages[api.EngineVLLM] != "gpustack/runner:cuda12.9-vllm0.29.0" {
		t.Errorf("engine image seen on the Pods not reported: %v", env.EngineImages)
	}
}

func TestReplicasWithoutRouterStatusUseRoleLabels(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(enginePod(d.ns, d.name, "md-server-a", "10.0.1.1", func(p *corev1.Pod) {
		delete(p.Labels, api.LabelMember) // size-1 Pods of some operator versions carry no member index
		p.Labels[api.LabelRoleKind] = "decode"
	}))
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1", func(p *corev1.Pod) { p.Labels[api.LabelComponent] = "server" }))
	reps, err := d.Replicas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Name != "md-server-a" || reps[0].Kind != api.RoleKindDecode {
		t.Fatalf("replicas %+v", reps)
	}
}

func mustRouterPods(t *testing.T, d *Deployment) []corev1.Pod {
	t.Helper()
	pods, err := d.routerPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return pods
}
