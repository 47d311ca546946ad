package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/simtest"
)

// deploymentStore is a RouterStore on a kubelet that plays the Deployment
// and ReplicaSet controllers for one replica: the current revision's Pod
// carries the store's own pod-template-hash ("rs-" and the render's), as a
// real ReplicaSet's differs from anything the operator computes.
type deploymentStore struct {
	*kubelet.Kubelet

	mu      sync.Mutex
	applied []string // the render's TemplateHash per ApplyRouter
	deleted int
}

func (s *deploymentStore) ApplyRouter(md *api.ModelDeployment, w operator.RouterWorkload, tmpl kubelet.PodSpec) (string, error) {
	s.mu.Lock()
	s.applied = append(s.applied, w.TemplateHash)
	s.mu.Unlock()
	hash := "rs-" + w.TemplateHash
	have := false
	for _, p := range s.routerPods(md) {
		switch {
		case p.Deleting():
		case p.Labels[operator.LabelPodTemplateHash] == hash:
			have = true
		default:
			s.Delete(p.Namespace, p.Name)
		}
	}
	if !have {
		tmpl.Labels[operator.LabelPodTemplateHash] = hash
		tmpl.Name = kubelet.GenerateName(w.Name + "-" + hash + "-")
		if _, err := s.Create(tmpl); err != nil {
			return "", err
		}
	}
	return hash, nil
}

func (s *deploymentStore) DeleteRouter(md *api.ModelDeployment) error {
	s.mu.Lock()
	s.deleted++
	s.mu.Unlock()
	for _, p := range s.routerPods(md) {
		s.Delete(p.Namespace, p.Name)
	}
	return nil
}

func (s *deploymentStore) routerPods(md *api.ModelDeployment) []kubelet.PodStatus {
	var out []kubelet.PodStatus
	for _, p := range s.ListStatus(md.Metadata.Namespace, map[string]string{api.LabelInstance: md.Metadata.Name}) {
		if _, ok := p.Labels[api.LabelRouter]; ok {
			out = append(out, p)
		}
	}
	return out
}

func (s *deploymentStore) calls() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied), s.deleted
}

func get(ctx context.Context, url string, timeout time.Duration, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit))
}

// statuses records what OnStatus receives.
type statuses struct {
	mu   sync.Mutex
	last *api.ModelDeployment
}

func (s *statuses) set(md *api.ModelDeployment) {
	s.mu.Lock()
	s.last = md
	s.mu.Unlock()
}

func (s *statuses) get() *api.ModelDeployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newStoreController(t *testing.T, extra ...string) (*Controller, *deploymentStore, *statuses, *[]kubelet.Event) {
	t.Helper()
	store := &deploymentStore{Kubelet: kubelet.New(kubelet.Options{})}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := store.Stop(ctx); err != nil {
			t.Errorf("kubelet stop: %v", err)
		}
	})
	st := &statuses{}
	var emu sync.Mutex
	var events []kubelet.Event
	cfg := Config{
		Store:    store,
		Programs: programs.Registry{VLLMRouter: simtest.Router, VLLM: simtest.Engine},
		Timing: Timing{ProbePeriod: 20 * time.Millisecond, ResyncPeriod: 20 * time.Millisecond,
			PreStopDelay: 10 * time.Millisecond, ServingValidity: 2 * time.Second},
		Get:      get,
		OnStatus: st.set,
		EventSink: func(e kubelet.Event) {
			emu.Lock()
			events = append(events, e)
			emu.Unlock()
		},
	}
	md := &api.ModelDeployment{
		Metadata: api.ObjectMeta{Name: "md", Namespace: "ns", Generation: 1},
		Spec: api.ModelDeploymentSpec{
			Model:  api.Model{Name: "m"},
			Engine: api.Engine{Name: api.EngineVLLM, Version: "0.29.0"},
			Router: &api.Router{Name: api.RouterVLLM, ExtraArgs: extra},
			Roles:  []api.Role{{Name: "server", Replicas: api.Ptr[int32](2), InstanceType: "t"}},
		},
	}
	operator.Default(md)
	c := New(cfg, md)
	c.Start()
	return c, store, st, &events
}

func ready(md *api.ModelDeployment) bool { return md != nil && api.ReadinessGaps(md) == nil }

// With a RouterStore the controller hands the router to the store's
// Deployment, never creates router Pods itself, judges them by the hash
// the store reports, and publishes every pass through OnStatus.
func TestRouterStoreRunsTheRouterDeployment(t *testing.T) {
	c, store, st, events := newStoreController(t, "--policy", "round_robin")
	waitFor(t, "Ready through OnStatus", func() bool { return ready(st.get()) })
	md := st.get()
	if cond := md.Status.FindCondition(api.ConditionReplicasUpToDate); cond == nil || cond.Status != "True" {
		t.Errorf("ReplicasUpToDate %+v: the router Pod carries the store's hash and must count as current", cond)
	}
	pods := store.routerPods(md)
	if len(pods) != 1 || pods[0].Labels[operator.LabelPodTemplateHash][:3] != "rs-" {
		t.Fatalf("router Pods %v, want the one the store's Deployment made", pods)
	}
	applied, _ := store.calls()
	w, _ := operator.RenderRouter(md)
	if len(applied) == 0 || applied[len(applied)-1] != w.TemplateHash {
		t.Errorf("ApplyRouter got %v, want the render's %s", applied, w.TemplateHash)
	}

	// An API server's update: a new generation, admitted already.
	next := c.Object()
	next.Spec.Router.ExtraArgs = []string{"--policy", "random"}
	next.Metadata.Generation = 2
	c.Observe(next)
	w2, _ := operator.RenderRouter(next)
	waitFor(t, "the new router revision Ready", func() bool {
		md := st.get()
		return ready(md) && md.Metadata.Generation == 2 && len(store.routerPods(md)) == 1 &&
			store.routerPods(md)[0].Labels[operator.LabelPodTemplateHash] == "rs-"+w2.TemplateHash
	})
	if got := c.Object().Status.FindCondition(api.ConditionRouterReady); got.ObservedGeneration != 2 {
		t.Errorf("RouterReady observedGeneration %d, want 2", got.ObservedGeneration)
	}

	c.Delete()
	select {
	case <-c.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the deleted deployment's loop did not end")
	}
	if _, deleted := store.calls(); deleted == 0 {
		t.Error("DeleteRouter was not called for a deleted deployment")
	}
	if left := store.ListStatus("ns", nil); len(left) != 0 {
		t.Errorf("Pods left after deletion: %v", left)
	}
	if !slices.ContainsFunc(*events, func(e kubelet.Event) bool { return e.Reason == "Admitted" }) {
		t.Errorf("EventSink got %v, want the Admitted event", *events)
	}
}

// Stop ends the loop and leaves the Pods where the store keeps them.
func TestStopLeavesThePods(t *testing.T) {
	c, store, st, _ := newStoreController(t)
	waitFor(t, "Ready", func() bool { return ready(st.get()) })
	c.Stop()
	c.Stop()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not end the loop")
	}
	if n := len(store.ListStatus("ns", nil)); n != 3 {
		t.Errorf("%d Pods after Stop, want the 2 engines and the router still there", n)
	}
}

// Both runners of the loop take their timing defaults from here; a
// duration that is set stays.
func TestTimingDefaults(t *testing.T) {
	got := Timing{}.WithDefaults()
	want := Timing{ProbePeriod: 50 * time.Millisecond, ResyncPeriod: 50 * time.Millisecond,
		PreStopDelay: 100 * time.Millisecond, ServingValidity: 2 * time.Second}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	set := Timing{ProbePeriod: time.Second, ResyncPeriod: 200 * time.Millisecond, PreStopDelay: time.Millisecond, ServingValidity: time.Minute}
	if got := set.WithDefaults(); got != set {
		t.Errorf("set durations changed: %+v, want %+v", got, set)
	}
}
