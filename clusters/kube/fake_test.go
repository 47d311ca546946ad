package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpustack/routing-conformance/api"
)

// fakeEnv is a cluster made of client-go fakes (objects, discovery, access
// reviews), a loopback HTTP server standing in for the API server's pods/log
// and pods/proxy paths, and a loopback port-forwarder. The test plays the
// operator: it writes status and creates Pods.
type fakeEnv struct {
	t       *testing.T
	kube    *kubefake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	podAPI  *fakePodAPI
	fwd     *fakeForwarder
	cluster *Cluster
}

var fakeListKinds = map[schema.GroupVersionResource]string{
	gvrModelDeployment:       "ModelDeploymentList",
	gvrInstanceType:          "InstanceTypeList",
	gvrSetting:               "SettingList",
	gvrCRD:                   "CustomResourceDefinitionList",
	gvrLocalQueue("v1beta2"): "LocalQueueList",
	gvrLocalQueue("v1beta1"): "LocalQueueList",
}

func newFakeEnv(t *testing.T, objs ...runtime.Object) *fakeEnv {
	t.Helper()
	var kubeObjs, dynObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			dynObjs = append(dynObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	e := &fakeEnv{t: t}
	e.kube = kubefake.NewClientset(kubeObjs...)
	e.kube.Resources = servedResources(true, true, "v1beta2")
	e.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.35.2"}
	e.allowAll()
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), fakeListKinds, dynObjs...)
	e.webhookRefuses()
	e.podAPI = newFakePodAPI(t)
	e.fwd = newFakeForwarder(t)
	e.cluster = NewWithClients(Clients{Kube: e.kube, Dynamic: e.dyn, PodIO: e.podAPI.client, Forwarder: e.fwd}, Options{
		RunID: "run1",
		Intervals: Intervals{Poll: 5 * time.Millisecond, RouterRollout: 5 * time.Second, Delete: 5 * time.Second,
			Request: 5 * time.Second, PortForward: 5 * time.Second},
		Logf: t.Logf,
	})
	t.Cleanup(func() { _ = e.cluster.Close(context.Background()) })
	return e
}

// servedResources is what discovery answers for the operator's and Kueue's groups.
func servedResources(modelDeployments, instanceTypes bool, kueueVersion string) []*metav1.APIResourceList {
	worker := &metav1.APIResourceList{GroupVersion: api.Group + "/" + api.Version}
	if modelDeployments {
		worker.APIResources = append(worker.APIResources, metav1.APIResource{Name: api.Resource, Namespaced: true, Kind: api.Kind})
	}
	if instanceTypes {
		worker.APIResources = append(worker.APIResources, metav1.APIResource{Name: "instancetypes", Kind: "InstanceType"})
	}
	out := []*metav1.APIResourceList{worker}
	if kueueVersion != "" {
		out = append(out, &metav1.APIResourceList{GroupVersion: kueueGroup + "/" + kueueVersion,
			APIResources: []metav1.APIResource{{Name: "localqueues", Namespaced: true, Kind: "LocalQueue"}}})
	}
	return out
}

// allowAll answers every SelfSubjectAccessReview with allowed, except the
// ones deny names ("verb resource[/sub]").
func (e *fakeEnv) allowAll(deny ...string) {
	denied := map[string]bool{}
	for _, d := range deny {
		denied[d] = true
	}
	e.kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ra := r.Spec.ResourceAttributes
		key := ra.Verb + " " + ra.Resource
		if ra.Subresource != "" {
			key += "/" + ra.Subresource
		}
		r.Status.Allowed = !denied[key]
		return true, r, nil
	})
}

// webhookRefuses plays the operator's validating webhook on dry-run creates:
// it refuses vllm-router in front of SGLang, as the real one does.
func (e *fakeEnv) webhookRefuses() {
	e.dyn.PrependReactor("create", api.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		if len(ca.CreateOptions.DryRun) == 0 {
			return false, nil, nil
		}
		return true, nil, webhookDenial("spec.router.name", `router "vllm-router" does not front engine "SGLang"; it accepts vLLM`)
	})
}

// webhookDenial is the StatusError the API server returns when a validating
// webhook answers with a field.ErrorList (apierrors.NewInvalid inside the
// webhook, re-wrapped by the API server).
func webhookDenial(field, msg string) error {
	full := fmt.Sprintf(`admission webhook "validate.modeldeployment.worker.gpustack.ai" denied the request: ModelDeployment.worker.gpustack.ai "x" is invalid: %s: Forbidden: %s`, field, msg)
	return &statusErr{metav1.Status{
		Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid, Message: full,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "FieldValueForbidden", Field: field, Message: "Forbidden: " + msg}}},
	}}
}

type statusErr struct{ st metav1.Status }

func (s *statusErr) Error() string         { return s.st.Message }
func (s *statusErr) Status() metav1.Status { return s.st }

// --- objects the operator would create ---------------------------------

func instanceTypeObj(name, phase string, acceleratable bool, remaining, entrance string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Group + "/v1alpha1", "kind": "InstanceType",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"acceleratable": acceleratable, "os": "linux", "arch": "amd64"},
		"status": map[string]any{"phase": phase, "entrance": entrance,
			"accelerator": map[string]any{"remaining": remaining, "capacity": remaining},
			"detail":      map[string]any{"product": "NVIDIA H20"}},
	}}
}

func twoServerMD(name string) *api.ModelDeployment {
	return &api.ModelDeployment{
		Metadata: api.ObjectMeta{Name: name},
		Spec: api.ModelDeploymentSpec{
			Model:  api.Model{Name: "Qwen/Qwen2.5-0.5B-Instruct"},
			Engine: api.Engine{Name: api.EngineVLLM, Version: "0.29.0"},
			Router: &api.Router{Name: api.RouterVLLM},
			Roles:  []api.Role{{Name: "server", Replicas: api.Ptr(int32(2)), Resources: &api.Resources{Accelerator: "1"}}},
		},
	}
}

// setStatus writes md's status as the operator would (the fake has no status
// subresource split, so an update of the whole object does).
func (e *fakeEnv) setStatus(ns, name string, st api.ModelDeploymentStatus, generation int64) {
	e.t.Helper()
	res := e.dyn.Resource(gvrModelDeployment).Namespace(ns)
	u, err := res.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("setStatus: %v", err)
	}
	b, _ := json.Marshal(st)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	u.Object["status"] = m
	if generation > 0 {
		u.SetGeneration(generation)
	}
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("setStatus: %v", err)
	}
}

func readyStatus(md string, routed bool, desired int32) api.ModelDeploymentStatus {
	st := api.ModelDeploymentStatus{
		Phase: api.PhaseReady,
		Roles: []api.RoleStatus{{Name: "server", Kind: api.RoleKindServer, Desired: desired, Ready: desired,
			Endpoints: &api.RoleEndpoints{Serving: api.ServingState{State: api.ServingConfirmed, Value: api.Ptr(desired)}}}},
	}
	if routed {
		st.Conditions = append(st.Conditions, api.Condition{Type: api.ConditionRouterReady, Status: "True", Reason: api.ReasonReady})
		st.Router = &api.RouterStatus{Name: api.RouterVLLM, Roles: []api.RouterRoleStatus{{Name: "server", Kind: api.RoleKindServer,
			Selector: map[string]string{api.LabelName: api.NameValue, api.LabelInstance: md, api.LabelMember: "0", api.LabelRoleKind: "server"}}}}
	}
	return st
}

type podOpt func(*corev1.Pod)

func routerPod(ns, md, name, uid string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid),
			CreationTimestamp: metav1.Now(),
			// Each Pod its own revision unless an option says otherwise.
			Labels: map[string]string{api.LabelName: api.NameValue, api.LabelInstance: md, api.LabelRouter: api.RouterVLLM,
				labelPodTemplateHash: "h-" + name},
			Annotations: map[string]string{api.AnnotationPromPort: "9090", api.AnnotationPromPath: "/metrics",
				api.AnnotationPromScheme: "http", api.AnnotationPromScrape: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: api.ContainerRouter, Image: "gpustack/llm-router:v0.2.0",
			Args: []string{"--host=0.0.0.0", "--port=8081"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: api.ContainerRouter, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func enginePod(ns, md, name, ip string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels: map[string]string{api.LabelName: api.NameValue, api.LabelInstance: md, api.LabelComponent: "server",
				api.LabelRoleKind: "server", api.LabelMember: "0", api.LabelOrdinal: "0"},
			Annotations: map[string]string{api.AnnotationPromPort: "8000", api.AnnotationPromPath: "/metrics", api.AnnotationPromScheme: "http"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: api.ContainerEngine, Image: "gpustack/runner:cuda12.9-vllm0.29.0",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
			Env:   []corev1.EnvVar{{Name: "HF_TOKEN", Value: "hf_supersecretvalue"}, {Name: "VLLM_LOGGING_LEVEL", Value: "INFO"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: api.ContainerEngine, Ready: true}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func crashLooping(exit int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		p.Status.ContainerStatuses[0] = corev1.ContainerStatus{Name: p.Spec.Containers[0].Name, RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error"}}}
	}
}

func (e *fakeEnv) addPod(p *corev1.Pod) {
	e.t.Helper()
	if _, err := e.kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("add Pod %s: %v", p.Name, err)
	}
}

// --- the API server's pods/log and pods/proxy, on loopback ----------------

// fakePodAPI serves /api/v1/namespaces/<ns>/pods/<pod>/log and
// /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<path> from maps, and
// records every request for assertions.
type fakePodAPI struct {
	srv    *httptest.Server
	client kubernetes.Interface

	mu       sync.Mutex
	logs     map[string]string // "<ns>/<pod>/<container>[/previous]" -> text
	proxy    map[string]string // "<ns>/<pod>:<port><path>" -> body
	requests []*url.URL
}

func newFakePodAPI(t *testing.T) *fakePodAPI {
	f := &fakePodAPI{logs: map[string]string{}, proxy: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	f.client = c
	return f
}

func (f *fakePodAPI) setLog(ns, pod, container string, previous bool, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := ns + "/" + pod + "/" + container
	if previous {
		k += "/previous"
	}
	f.logs[k] = text
}

func (f *fakePodAPI) setProxy(ns, podPort, path, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proxy[ns+"/"+podPort+path] = body
}

func (f *fakePodAPI) seen() []*url.URL {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*url.URL(nil), f.requests...)
}

func (f *fakePodAPI) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL)
	f.mu.Unlock()
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/", 4)
	if len(parts) < 4 || parts[1] != "pods" {
		notFound(w, "no such path "+r.URL.Path)
		return
	}
	ns, pod, rest := parts[0], parts[2], parts[3]
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case rest == "log":
		k := ns + "/" + pod + "/" + r.URL.Query().Get("container")
		if r.URL.Query().Get("previous") == "true" {
			k += "/previous"
		}
		text, ok := f.logs[k]
		if !ok {
			badRequest(w, fmt.Sprintf("previous terminated container %q in pod %q not found", r.URL.Query().Get("container"), pod))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, text)
	case strings.HasPrefix(rest, "proxy"):
		path := strings.TrimPrefix(rest, "proxy")
		body, ok := f.proxy[ns+"/"+pod+path]
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "error trying to reach service: dial tcp: connection refused")
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, body)
	default:
		notFound(w, "no such subresource "+rest)
	}
}

func notFound(w http.ResponseWriter, msg string) {
	writeStatus(w, 404, metav1.StatusReasonNotFound, msg)
}
func badRequest(w http.ResponseWriter, msg string) {
	writeStatus(w, 400, metav1.StatusReasonBadRequest, msg)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
}

// --- a port-forwarder on loopback that can drop ---------------------------

// fakeForwarder "forwards" to a backend HTTP server per Pod: each Forward
// opens a real loopback listener that relays to the Pod's backend, and Drop
// kills it the way a lost API server connection does.
type fakeForwarder struct {
	t        *testing.T
	mu       sync.Mutex
	backends map[string]string // pod -> host:port
	tunnels  []*fakeTunnel
	calls    []string // pod names, in order
	fail     error
}

func newFakeForwarder(t *testing.T) *fakeForwarder {
	return &fakeForwarder{t: t, backends: map[string]string{}}
}

func (f *fakeForwarder) setBackend(pod, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends[pod] = addr
}

func (f *fakeForwarder) Forward(ctx context.Context, ns, pod string, port int) (Tunnel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, pod)
	if f.fail != nil {
		return nil, f.fail
	}
	backend, ok := f.backends[pod]
	if !ok {
		return nil, fmt.Errorf("pod %s has no backend", pod)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &fakeTunnel{ln: ln, backend: backend, done: make(chan struct{}), conns: map[net.Conn]bool{}}
	t.wg.Add(1)
	go t.serve()
	f.tunnels = append(f.tunnels, t)
	return t, nil
}

func (f *fakeForwarder) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeForwarder) last() *fakeTunnel {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tunnels[len(f.tunnels)-1]
}

type fakeTunnel struct {
	ln      net.Listener
	backend string
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
}

func (t *fakeTunnel) Addr() string          { return t.ln.Addr().String() }
func (t *fakeTunnel) Done() <-chan struct{} { return t.done }

// Drop is the connection to the API server dying: listener and every relayed
// connection close at once.
func (t *fakeTunnel) Drop() {
	t.once.Do(func() {
		close(t.done)
		_ = t.ln.Close()
		t.mu.Lock()
		for c := range t.conns {
			_ = c.Close()
		}
		t.mu.Unlock()
	})
}

func (t *fakeTunnel) Close() {
	t.Drop()
	t.wg.Wait()
}

func (t *fakeTunnel) serve() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", t.backend)
		if err != nil {
			_ = c.Close()
			continue
		}
		t.mu.Lock()
		t.conns[c], t.conns[up] = true, true
		t.mu.Unlock()
		t.wg.Add(2)
		go func() { defer t.wg.Done(); _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { defer t.wg.Done(); _, _ = io.Copy(c, up); _ = c.Close() }()
	}
}

// eventually polls cond until it holds or the deadline passes (tests only).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
