package upstream

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpustack/routing-conformance/sim/proc"
)

// fakePods is a proc.PodWatcher whose Pods a test changes.
type fakePods struct {
	mu   sync.Mutex
	pods map[string]proc.Pod
	tick chan struct{}
}

func (f *fakePods) List(ns string, sel map[string]string) []proc.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []proc.Pod
	for _, p := range f.pods {
		if ns == "" || p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakePods) Watch() (<-chan struct{}, func()) { return f.tick, func() {} }

func (f *fakePods) set(p proc.Pod, gone bool) {
	f.mu.Lock()
	if gone {
		delete(f.pods, p.Name)
	} else {
		f.pods[p.Name] = p
	}
	f.mu.Unlock()
	select {
	case f.tick <- struct{}{}:
	default:
	}
}

// The sim's Pods API answers client-go, the Kubernetes client of record,
// as an API server does: a list with a resourceVersion, then a watch from
// it that sends each later change once, in order, with the Ready
// condition, the Pod IP and the deletionTimestamp discovery reads; a
// label selector filters both.
func TestPodAPIServesListAndWatchToClientGo(t *testing.T) {
	pod := func(name, uid string, ready, deleting bool) proc.Pod {
		return proc.Pod{PodInfo: proc.PodInfo{Name: name, Namespace: "ns", UID: uid, IP: "127.0.3.1",
			Labels: map[string]string{"app": "md"}}, Phase: "Running", Ready: ready, Deleting: deleting}
	}
	f := &fakePods{pods: map[string]proc.Pod{}, tick: make(chan struct{}, 1)}
	f.set(pod("md-0", "u0", true, false), false)
	f.set(proc.Pod{PodInfo: proc.PodInfo{Name: "other", Namespace: "ns", UID: "u9", Labels: map[string]string{"app": "x"}}, Phase: "Running"}, false)
	a := newPodAPI(f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go a.run(ctx)
	srv := httptest.NewServer(a)
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	var list *corev1.PodList
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err = cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{LabelSelector: "app=md"})
		if err == nil && len(list.Items) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "md-0" || list.ResourceVersion == "" {
		t.Fatalf("list = %+v, %v; want md-0 alone with a resourceVersion", list, err)
	}
	if c := list.Items[0].Status.Conditions; len(c) != 1 || c[0].Type != corev1.PodReady || c[0].Status != corev1.ConditionTrue ||
		list.Items[0].Status.PodIP != "127.0.3.1" || list.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("status = %+v", list.Items[0].Status)
	}

	w, err := cs.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{LabelSelector: "app=md", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Each change is seen before the next (the Pods watcher coalesces
	// changes between two reads, as the kubelet's does).
	step := func(p proc.Pod, gone bool) {
		a.mu.Lock()
		rv := a.rv
		a.mu.Unlock()
		f.set(p, gone)
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			a.mu.Lock()
			grew := a.rv > rv
			a.mu.Unlock()
			if grew {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("the API did not see %s change", p.Name)
			}
		}
	}
	step(pod("md-0", "u0", false, false), false)
	step(pod("md-0", "u0", false, true), false)
	step(pod("md-1", "u1", true, false), false)
	step(pod("md-0", "u0", false, true), true)
	type seen struct {
		typ      watch.EventType
		name     string
		ready    bool
		deleting bool
	}
	want := []seen{{watch.Modified, "md-0", false, false}, {watch.Modified, "md-0", false, true},
		{watch.Added, "md-1", true, false}, {watch.Deleted, "md-0", false, true}}
	var got []seen
	timeout := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case e := <-w.ResultChan():
			p := e.Object.(*corev1.Pod)
			got = append(got, seen{e.Type, p.Name, p.Status.Conditions[0].Status == corev1.ConditionTrue, p.DeletionTimestamp != nil})
		case <-timeout:
			t.Fatalf("events %+v, want %+v", got, want)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %+v, want %+v", got, want)
		}
	}
}
