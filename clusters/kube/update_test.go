package kube

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// patches records the JSON patches sent for ModelDeployments and runs
// onPatch (the fake operator's reaction) after each.
type patches struct {
	mu      sync.Mutex
	bodies  []string
	onPatch func()
}

func (p *patches) install(e *fakeEnv) {
	e.dyn.PrependReactor("patch", api.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		if pa.GetPatchType() != "application/json-patch+json" {
			e.t.Errorf("patch type %s, want a JSON patch", pa.GetPatchType())
		}
		p.mu.Lock()
		p.bodies = append(p.bodies, string(pa.GetPatch()))
		f := p.onPatch
		p.mu.Unlock()
		if f != nil {
			go f()
		}
		return false, nil, nil // let the tracker apply it
	})
}

func (p *patches) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bodies...)
}

func TestUpdateSendsOnlyTheChangedLeaf(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "4", "q"))
	d := deployed(t, e, "md")
	var p patches
	p.install(e)
	if err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Roles[0].Replicas = api.Ptr(int32(3)) }); err != nil {
		t.Fatal(err)
	}
	got := p.all()
	if len(got) != 1 || got[0] != `[{"op":"replace","path":"/spec/roles/0/replicas","value":3}]` {
		t.Fatalf("patches %v", got)
	}
	obj, _ := d.Object(context.Background())
	if obj.Spec.Roles[0].RoleReplicas() != 3 || obj.Spec.Roles[0].InstanceType != h20 {
		t.Errorf("after patch: %+v", obj.Spec.Roles[0])
	}
	// An edit that changes nothing sends nothing.
	if err := d.Update(context.Background(), func(*api.ModelDeployment) {}); err != nil || len(p.all()) != 1 {
		t.Errorf("no-op update sent %v (%v)", p.all(), err)
	}
}

func TestUpdateKeepsFieldsTheSuiteDoesNotModel(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "4", "q"))
	d := deployed(t, e, "md")
	// The webhook defaults fields the suite's types do not know (shmSize).
	res := e.dyn.Resource(gvrModelDeployment).Namespace(d.ns)
	u, _ := res.Get(context.Background(), d.name, metav1.GetOptions{})
	roles, _, _ := unstructured.NestedSlice(u.Object, "spec", "roles")
	roles[0].(map[string]any)["shmSize"] = "16Gi"
	_ = unstructured.SetNestedSlice(u.Object, roles, "spec", "roles")
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Roles[0].ExtraArgs = []string{"--max-num-seqs", "4"} }); err != nil {
		t.Fatal(err)
	}
	u, _ = res.Get(context.Background(), d.name, metav1.GetOptions{})
	roles, _, _ = unstructured.NestedSlice(u.Object, "spec", "roles")
	if roles[0].(map[string]any)["shmSize"] != "16Gi" {
		t.Errorf("the patch dropped shmSize: %v", roles[0])
	}
}

func TestUpdateRouterArgsWaitsForTheNewRouterPodAndTrafficFollows(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "4", "q"))
	d := deployed(t, e, "md")
	oldSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "old router") }))
	defer oldSrv.Close()
	newSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "new router") }))
	defer newSrv.Close()
	e.addPod(routerPod(d.ns, d.name, "md-router-old", "u-old"))
	e.fwd.setBackend("md-router-old", oldSrv.Listener.Addr().String())
	e.fwd.setBackend("md-router-new", newSrv.Listener.Addr().String())

	base, err := d.OpenAIBaseURL(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := httpGet(t, base+"/models"); got != "old router" {
		t.Fatalf("before the update: %q", got)
	}

	// The fake operator: the Deployment rolls, a new Pod starts not Ready,
	// turns Ready, then the old Pod goes.
	var p patches
	p.onPatch = func() {
		time.Sleep(20 * time.Millisecond)
		e.addPod(routerPod(d.ns, d.name, "md-router-new", "u-new", func(p *corev1.Pod) {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
		}))
		time.Sleep(20 * time.Millisecond)
		np, _ := e.kube.CoreV1().Pods(d.ns).Get(context.Background(), "md-router-new", metav1.GetOptions{})
		np.Status.Conditions[0].Status = corev1.ConditionTrue
		_, _ = e.kube.CoreV1().Pods(d.ns).UpdateStatus(context.Background(), np, metav1.UpdateOptions{})
		_ = e.kube.CoreV1().Pods(d.ns).Delete(context.Background(), "md-router-old", metav1.DeleteOptions{})
	}
	p.install(e)

	if err := d.Update(context.Background(), func(md *api.ModelDeployment) {
		md.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
	}); err != nil {
		t.Fatal(err)
	}
	if got := p.all(); len(got) != 1 || got[0] != `[{"op":"add","path":"/spec/router/extraArgs","value":["--policy","round_robin"]}]` {
		t.Errorf("patches %v", got)
	}
	eventually(t, "old router Pod gone", func() bool {
		st, _ := d.RouterState(context.Background())
		return len(st) == 1 && st[0].UID == "u-new" && st[0].Ready
	})
	base2, _ := d.OpenAIBaseURL(context.Background())
	if base2 != base {
		t.Errorf("base URL changed from %s to %s", base, base2)
	}
	// The old Pod terminates and closes its connections; the next
	// request through the same URL reaches the new Pod.
	oldSrv.CloseClientConnections()
	if got := httpGet(t, base+"/models"); got != "new router" {
		t.Errorf("after the update the same URL reaches %q", got)
	}
}

func TestUpdateToABadPolicyReturnsOnceTheNewRouterCrashes(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "4", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-old", "u-old"))
	var p patches
	p.onPatch = func() {
		time.Sleep(10 * time.Millisecond)
		e.addPod(routerPod(d.ns, d.name, "md-router-new", "u-new", crashLooping(2)))
	}
	p.install(e)
	err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = []string{"--policy", "round_robbin"} })
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	st, _ := d.RouterState(context.Background())
	var crashed bool
	for _, s := range st {
		crashed = crashed || (s.UID == "u-new" && s.LastExitCode != nil && *s.LastExitCode == 2)
	}
	if !crashed {
		t.Errorf("router state %+v", st)
	}
}

func TestUpdateTimesOutWithoutANewRouterPod(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "4", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-old", "u-old"))
	e.cluster.iv.RouterRollout = 50 * time.Millisecond
	err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = []string{"--policy", "random"} })
	if err == nil || !strings.Contains(err.Error(), "0 of 1 router Pods of the current router args exist") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Update = %v", err)
	}
}

func TestUpdateRefusalIsAdmissionError(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "4", "q"))
	d := deployed(t, e, "md")
	e.dyn.PrependReactor("patch", api.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, webhookDenial("spec.router.name", "field is immutable")
	})
	err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Router.Name = api.RouterLLMD })
	var ae *clusters.AdmissionError
	if !errors.As(err, &ae) || ae.Field != "spec.router.name" || !strings.Contains(ae.Message, "field is immutable") {
		t.Errorf("Update = %T %v", err, err)
	}
}

func TestJSONPatchOperations(t *testing.T) {
	base := func() *api.ModelDeployment {
		md := twoServerMD("md")
		md.Spec.Roles[0].InstanceType = h20
		return md
	}
	for _, tc := range []struct {
		name   string
		mutate func(*api.ModelDeployment)
		want   string
	}{
		{"router args replaced whole", func(md *api.ModelDeployment) {
			md.Spec.Router.ExtraArgs = []string{"--policy", "random"}
		}, `[{"op":"add","path":"/spec/router/extraArgs","value":["--policy","random"]}]`},
		{"router removed", func(md *api.ModelDeployment) { md.Spec.Router = nil },
			`[{"op":"remove","path":"/spec/router"}]`},
		{"router replicas", func(md *api.ModelDeployment) { md.Spec.Router.Replicas = api.Ptr(int32(2)) },
			`[{"op":"add","path":"/spec/router/replicas","value":2}]`},
		{"label with a slash", func(md *api.ModelDeployment) { md.Metadata.Labels = map[string]string{"a.io/b": "c"} },
			`[{"op":"add","path":"/metadata/labels","value":{"a.io/b":"c"}}]`},
		{"engine version", func(md *api.ModelDeployment) { md.Spec.Engine.Version = "0.30.0" },
			`[{"op":"replace","path":"/spec/engine/version","value":"0.30.0"}]`},
	} {
		old := base()
		next, _ := deepCopyMD(old)
		tc.mutate(next)
		ops, err := modelDeploymentPatch(old, next)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ops)
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
	}
	// Zero values keep their "value" (omitempty would make the patch invalid).
	b, _ := json.Marshal([]PatchOp{{Op: "replace", Path: "/spec/router/requestTimeoutSeconds", Value: 0}})
	if string(b) != `[{"op":"replace","path":"/spec/router/requestTimeoutSeconds","value":0}]` {
		t.Errorf("zero value: %s", b)
	}
	if got := jsonDiff("/m", map[string]any{"a/b~c": "x"}, map[string]any{"a/b~c": "y"}); got[0].Path != "/m/a~1b~0c" {
		t.Errorf("pointer escaping: %v", got)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
