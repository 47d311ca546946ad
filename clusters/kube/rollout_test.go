package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/api"
)

// Right after an edit the operator's readiness gate still holds through
// the old router Pod, and the Deployment controller deletes it only a while
// after the new one is Ready: Update and then WaitReady must end with the
// new Pod alone, not with both (seen once on the API-server tier).
func TestAfterAnEditReadyMeansTheNewRouterPodAlone(t *testing.T) {
	e, d := readyWithRouter(t, "md-router-old", "u-old")
	var p patches
	p.onPatch = func() {
		e.addPod(routerPod(d.ns, d.name, "md-router-new", "u-new"))
		time.Sleep(150 * time.Millisecond) // the new Pod Ready, the old one still serving
		_ = e.kube.CoreV1().Pods(d.ns).Delete(context.Background(), "md-router-old", metav1.DeleteOptions{})
	}
	p.install(e)
	if err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = []string{"--policy", "random"} }); err != nil {
		t.Fatal(err)
	}
	if err := waitReadyBounded(d); err != nil {
		t.Fatal(err)
	}
	st, _ := d.RouterState(context.Background())
	if len(st) != 1 || st[0].UID != "u-new" || !st[0].Ready {
		t.Fatalf("router Pods right after WaitReady: %+v, want the new one alone", st)
	}
}

// A refused value edited in leaves the old router Pod serving (a failed
// rollout): WaitReady stops on the refusal rather than taking the old Pod
// for Ready. Edited back, the Deployment controller reuses the old
// revision: no new Pod comes, and Ready is the old Pod alone again.
func TestARefusedValueEditedInAndBack(t *testing.T) {
	e, d := readyWithRouter(t, "md-router-old", "u-old")
	var p patches
	p.onPatch = func() { e.addPod(routerPod(d.ns, d.name, "md-router-bad", "u-bad", crashLooping(2))) }
	p.install(e)
	if err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = []string{"--policy", "roundrobin"} }); err != nil {
		t.Fatalf("Update to a refused value: %v", err)
	}
	err := waitReadyBounded(d)
	if err == nil || !strings.Contains(err.Error(), "md-router-bad") || !strings.Contains(err.Error(), "last exit code 2") {
		t.Fatalf("WaitReady after the refused value = %v, want it to stop on md-router-bad's exit 2", err)
	}

	p.onPatch = func() {
		_ = e.kube.CoreV1().Pods(d.ns).Delete(context.Background(), "md-router-bad", metav1.DeleteOptions{})
	}
	if err := d.Update(context.Background(), func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = nil }); err != nil {
		t.Fatalf("Update back: %v", err)
	}
	if err := waitReadyBounded(d); err != nil {
		t.Fatal(err)
	}
	st, _ := d.RouterState(context.Background())
	if len(st) != 1 || st[0].UID != "u-old" {
		t.Fatalf("router Pods after the edit back: %+v, want the old one alone", st)
	}
}

// readyWithRouter is a Ready deployment with one router Pod, waited for
// once (so its revision is known as the creation's).
func readyWithRouter(t *testing.T, pod, uid string) (*fakeEnv, *Deployment) {
	t.Helper()
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "4", "q"))
	d := deployed(t, e, "md")
	e.setStatus(d.ns, d.name, readyStatus(d.name, true, 2), 0)
	e.addPod(routerPod(d.ns, d.name, pod, uid))
	if err := waitReadyBounded(d); err != nil {
		t.Fatal(err)
	}
	return e, d
}

func TestRouterRevisionsTellEachWriteFromTheOnesBefore(t *testing.T) {
	var r routerRevisions
	r.wrote(nil)
	if !r.current("a") {
		t.Fatal("the first revision seen after the create runs its args")
	}
	r.wrote([]string{"--policy", "random"})
	if r.current("a") {
		t.Error("the old revision is current after an edit")
	}
	if !r.current("b") || r.current("c") {
		t.Error("the first new revision after the edit is its; a third one is nobody's")
	}
	r.wrote(nil)
	if !r.current("a") || r.current("b") {
		t.Error("an edit back to the created args makes their revision current again")
	}
	if r.current("d") {
		t.Error("an edit back to known args takes no new revision for them")
	}
}
