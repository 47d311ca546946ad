package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// The routers' service discovery (kube-rs's watcher over core/v1 Pods:
// one list, then a watch from its resourceVersion) needs a Kubernetes API.
// The plain sim has none, so the router container gets the read side of
// one: GET /api/v1/pods and /api/v1/namespaces/{ns}/pods, listed and
// watched (watch=true, resourceVersion, timeoutSeconds, labelSelector), over
// the kubelet's Pods as the container's Pods watcher sees them. The
// routers' own discovery code then runs as on a cluster: which Pods it adds
// and removes, and when, is theirs (the kube-api row of Translations).
// Nothing here writes; the API-server tier runs them against a real
// kube-apiserver.

// podAPI is one router container's Pods API.
type podAPI struct {
	pods proc.PodWatcher

	mu sync.Mutex
	rv int64
	// state is the last object sent per namespace/name.
	state map[string]corev1.Pod
	// deleting is when a Pod was first seen terminating: its
	// deletionTimestamp, fixed from then on.
	deleting map[string]metav1.Time
	// events is every change since the API started, in resourceVersion order.
	events []watchEvent
	// changed is closed (and replaced) whenever events grows.
	changed chan struct{}
}

type watchEvent struct {
	Type   string     `json:"type"`
	Object corev1.Pod `json:"object"`
	rv     int64
}

func newPodAPI(pods proc.PodWatcher) *podAPI {
	return &podAPI{pods: pods, state: map[string]corev1.Pod{}, deleting: map[string]metav1.Time{}, changed: make(chan struct{})}
}

// run follows the Pods until ctx ends.
func (a *podAPI) run(ctx context.Context) {
	tick, cancel := a.pods.Watch()
	defer cancel()
	a.sync()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			a.sync()
		}
	}
}

// sync turns the Pods' current state into ADDED, MODIFIED and DELETED
// events, each with the next resourceVersion.
func (a *podAPI) sync() {
	now := a.pods.List("", nil)
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[string]bool{}
	grew := false
	slices.SortFunc(now, func(x, y proc.Pod) int { return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name) })
	for _, p := range now {
		key := p.Namespace + "/" + p.Name
		seen[key] = true
		obj := a.object(key, p)
		old, ok := a.state[key]
		typ := "ADDED"
		if ok {
			if old.UID == obj.UID && samePod(old, obj) {
				continue
			}
			typ = "MODIFIED"
			if old.UID != obj.UID {
				// A new Pod under an old name: the old one went first.
				a.emit("DELETED", old)
				typ = "ADDED"
			}
		}
		a.emit(typ, obj)
		grew = true
	}
	for key, old := range a.state {
		if !seen[key] {
			a.emit("DELETED", old)
			delete(a.deleting, key)
			grew = true
		}
	}
	if grew {
		close(a.changed)
		a.changed = make(chan struct{})
	}
}

// emit records one event with the next resourceVersion (a.mu held).
func (a *podAPI) emit(typ string, obj corev1.Pod) {
	a.rv++
	obj.ResourceVersion = strconv.FormatInt(a.rv, 10)
	key := obj.Namespace + "/" + obj.Name
	if typ == "DELETED" {
		delete(a.state, key)
	} else {
		a.state[key] = obj
	}
	a.events = append(a.events, watchEvent{Type: typ, Object: obj, rv: a.rv})
}

// samePod compares two objects apart from their resourceVersion.
func samePod(x, y corev1.Pod) bool {
	x.ResourceVersion, y.ResourceVersion = "", ""
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(bx) == string(by)
}

// object is p as the API serves it: what discovery reads (name, namespace,
// uid, labels, annotations, deletionTimestamp; phase, podIP and the Ready
// condition) and a spec with its one container (the field is required).
func (a *podAPI) object(key string, p proc.Pod) corev1.Pod {
	ready := corev1.ConditionFalse
	if p.Ready {
		ready = corev1.ConditionTrue
	}
	obj := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: types.UID(p.UID),
			Labels: p.Labels, Annotations: p.Annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: api.ContainerEngine}}},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(p.Phase), PodIP: p.IP,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
	}
	if p.IP != "" {
		obj.Status.PodIPs = []corev1.PodIP{{IP: p.IP}}
	}
	if p.Deleting {
		t, ok := a.deleting[key]
		if !ok {
			t = metav1.NewTime(time.Now().Truncate(time.Second))
			a.deleting[key] = t
		}
		obj.DeletionTimestamp = &t
	}
	return obj
}

// ServeHTTP answers the list and watch of Pods; anything else is the API
// server's 404 Status.
func (a *podAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, ok := podsPath(r.URL.Path)
	if !ok || r.Method != http.MethodGet {
		status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("the server could not find the requested resource (%s %s)", r.Method, r.URL.Path))
		return
	}
	q := r.URL.Query()
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		status(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("unable to parse requirement: %v", err))
		return
	}
	match := func(p *corev1.Pod) bool {
		return (ns == "" || p.Namespace == ns) && sel.Matches(labels.Set(p.Labels))
	}
	if w1 := q.Get("watch"); w1 == "true" || w1 == "1" {
		a.watch(w, r, match)
		return
	}
	a.mu.Lock()
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(a.rv, 10)}, Items: []corev1.Pod{}}
	for _, key := range slices.Sorted(maps.Keys(a.state)) {
		if p := a.state[key]; match(&p) {
			list.Items = append(list.Items, p)
		}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// watch streams the events after the request's resourceVersion (all
// current Pods as ADDED for none or "0"), one JSON object a line, until
// timeoutSeconds, the client leaving or the API stopping.
func (a *podAPI) watch(w http.ResponseWriter, r *http.Request, match func(*corev1.Pod) bool) {
	q := r.URL.Query()
	timeout := 290 * time.Second
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flush := http.NewResponseController(w)
	enc := json.NewEncoder(w)

	var from int64
	var pending []watchEvent
	a.mu.Lock()
	if rv := q.Get("resourceVersion"); rv == "" || rv == "0" {
		for _, key := range slices.Sorted(maps.Keys(a.state)) {
			pending = append(pending, watchEvent{Type: "ADDED", Object: a.state[key]})
		}
		from = a.rv
	} else if n, err := strconv.ParseInt(rv, 10, 64); err == nil {
		from = n
	}
	for {
		for _, e := range a.events {
			if e.rv > from {
				pending = append(pending, e)
				from = e.rv
			}
		}
		changed := a.changed
		a.mu.Unlock()
		for _, e := range pending {
			if match(&e.Object) {
				if enc.Encode(e) != nil {
					return
				}
			}
		}
		pending = pending[:0]
		if flush.Flush() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		a.mu.Lock()
	}
}

// podsPath is the namespace of a Pods collection path ("" for all).
func podsPath(p string) (string, bool) {
	if p == "/api/v1/pods" {
		return "", true
	}
	rest, ok := strings.CutPrefix(p, "/api/v1/namespaces/")
	if !ok {
		return "", false
	}
	ns, tail, ok := strings.Cut(rest, "/")
	return ns, ok && tail == "pods" && ns != ""
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Message: msg, Reason: metav1.StatusReason(reason), Code: int32(code)})
}

// servePodAPI starts the container's Pods API on the Pod's loopback and
// writes a kubeconfig naming it into dir; stop ends both.
func servePodAPI(ctx context.Context, c *proc.Container, dir string) (kubeconfig string, stop func(), err error) {
	ln, err := c.Listen("127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("the Pods API's port on the Pod's loopback: %w", err)
	}
	a := newPodAPI(c.Pods)
	ctx, cancel := context.WithCancel(ctx)
	go a.run(ctx)
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: http://%s
contexts:
- name: sim
  context:
    cluster: sim
    user: sim
    namespace: default
current-context: sim
users:
- name: sim
  user: {}
`, ln.Addr().String())
	if err := os.WriteFile(kubeconfig, []byte(body), 0o600); err != nil {
		cancel()
		_ = srv.Close()
		return "", nil, err
	}
	return kubeconfig, func() { cancel(); _ = srv.Close() }, nil
}
