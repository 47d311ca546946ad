package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/clusters"
)

func readySince(at time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(at)}}
	}
}

func notReady() podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	}
}

func gpuLimit(n int64) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	}
}

func costNow(t *testing.T, d *Deployment) clusters.Cost {
	t.Helper()
	c, err := d.Cost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The informer sees engine Pods come, turn Ready and go: started and Ready
// are counted once per Pod, router Pods and other deployments' Pods are not,
// and accelerator-seconds run from Ready to removal (or to Delete).
func TestCostCountsEnginePodsAndAcceleratorSeconds(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "8", "q"))
	d := deployed(t, e, "md")
	if got := costNow(t, d); got != (clusters.Cost{}) {
		t.Fatalf("cost before any Pod: %+v", got)
	}
	now := time.Now()
	// a asks for 2 GPUs itself; b asks for none in its spec, so its role's
	// resources.accelerator (1) counts.
	e.addPod(enginePod(d.ns, d.name, "md-server-a", "10.0.1.1", gpuLimit(2), notReady()))
	e.addPod(enginePod(d.ns, d.name, "md-server-b", "10.0.1.2", readySince(now.Add(-10*time.Second))))
	e.addPod(routerPod(d.ns, d.name, "md-router-x", "r1"))
	e.addPod(enginePod(d.ns, "other", "other-server-c", "10.0.1.3"))
	eventually(t, "two engine Pods, one Ready", func() bool {
		c := costNow(t, d)
		return c.EnginePodsStarted == 2 && c.EnginePodsReady == 1
	})

	a, err := e.kube.CoreV1().Pods(d.ns).Get(context.Background(), "md-server-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	readySince(now.Add(-5 * time.Second))(a)
	if _, err := e.kube.CoreV1().Pods(d.ns).Update(context.Background(), a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a Ready", func() bool { return costNow(t, d).EnginePodsReady == 2 })
	if err := e.kube.CoreV1().Pods(d.ns).Delete(context.Background(), "md-server-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// b is held from its Ready to its removal: about 10 s × 1; a from its
	// Ready on: about 5 s × 2 and growing.
	eventually(t, "b's time to stop", func() bool {
		c1 := costNow(t, d).AcceleratorSeconds
		time.Sleep(20 * time.Millisecond)
		c2 := costNow(t, d).AcceleratorSeconds
		return c2-c1 < 0.2 && c2 > 19 // only a's 2 GPUs still count
	})
	if err := e.kube.CoreV1().Pods(d.ns).Delete(context.Background(), "md-server-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	final := costNow(t, d)
	// A condition's time is kept to the second, so each Ready may read up to
	// 1 s early; the test itself took held seconds.
	held := time.Since(now).Seconds()
	if final.EnginePodsStarted != 2 || final.EnginePodsReady != 2 ||
		final.AcceleratorSeconds < 10+2*5 || final.AcceleratorSeconds > (11+held)+2*(6+held) {
		t.Fatalf("final cost %+v, want 2 started, 2 ready, about 10 + 2×5 accelerator-seconds", final)
	}
	time.Sleep(30 * time.Millisecond)
	if again := costNow(t, d); again != final {
		t.Fatalf("cost moved after Delete: %+v then %+v", final, again)
	}
}

func TestRequestedAcceleratorsReadsGPUResourcesOnly(t *testing.T) {
	p := enginePod("ns", "md", "p", "10.0.0.1", gpuLimit(2))
	p.Spec.Containers[0].Resources.Limits["rdma/hca"] = *resource.NewQuantity(1, resource.DecimalSI) // a fabric NIC, not a GPU
	p.Spec.InitContainers = []corev1.Container{{Name: "routing-proxy", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"amd.com/gpu": *resource.NewQuantity(1, resource.DecimalSI)}}}}
	if got := requestedAccelerators(p); got != 3 {
		t.Fatalf("requested accelerators %d, want 3 (2 nvidia.com/gpu limits + 1 amd.com/gpu request)", got)
	}
	if got := requestedAccelerators(enginePod("ns", "md", "q", "10.0.0.2")); got != 0 {
		t.Fatalf("a Pod without GPU resources requests %d", got)
	}
}

func TestCostIsFinalAfterCloseEvenWithoutDelete(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "8", "q"))
	d := deployed(t, e, "md")
	e.addPod(enginePod(d.ns, d.name, "md-server-a", "10.0.1.1", readySince(time.Now().Add(-time.Second))))
	eventually(t, "a Ready", func() bool { return costNow(t, d).EnginePodsReady == 1 })
	if err := e.cluster.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := costNow(t, d)
	time.Sleep(30 * time.Millisecond)
	if again := costNow(t, d); again != first || first.EnginePodsReady != 1 {
		t.Fatalf("cost moved after Close: %+v then %+v", first, again)
	}
}
