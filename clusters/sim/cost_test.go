package sim_test

import (
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/simtest"
)

func costOf(t *testing.T, d clusters.Deployment) clusters.Cost {
	t.Helper()
	c, err := d.Cost(ctxT(t, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A replaced engine Pod (deleted under the deployment, as an eviction or a
// lost node does) is a new Pod: a second image pull and model load on a
// cluster, so it counts. After Delete the figures stay put.
func TestCostCountsEveryEnginePodStartedAndReady(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("cost", api.RouterVLLM, api.EngineVLLM, 2))
	if got := costOf(t, d); got != (clusters.Cost{EnginePodsStarted: 2, EnginePodsReady: 2}) {
		t.Fatalf("cost of a Ready 2-replica deployment: %+v, want 2 started, 2 ready, 0 accelerator-seconds", got)
	}
	reps, err := d.Replicas(ctxT(t, time.Second))
	if err != nil || len(reps) != 2 {
		t.Fatalf("replicas %v %v", reps, err)
	}
	c.Kubelet().Delete(d.Namespace(), reps[0].Name)
	ctx := ctxT(t, 20*time.Second)
	eventually(t, 10*time.Second, "a replacement engine Pod", func() (bool, string) {
		now, _ := d.Replicas(ctx)
		return len(now) == 2 && now[0].Name != reps[0].Name && now[1].Name != reps[0].Name, ""
	})
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := clusters.Cost{EnginePodsStarted: 3, EnginePodsReady: 3}
	if got := costOf(t, d); got != want {
		t.Fatalf("cost after one replacement: %+v, want %+v", got, want)
	}
	if err := d.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if got := costOf(t, d); got != want {
		t.Fatalf("cost after Delete: %+v, want %+v", got, want)
	}
}

// An engine that keeps crashing restarts in its own Pod (restartPolicy
// Always): one Pod started, none Ready; router Pods never count.
func TestCostOfACrashLoopingEngineIsOnePodNeverReady(t *testing.T) {
	c := newCluster(t, sim.Options{Programs: crashingEngine()})
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, md("crash", api.RouterVLLM, api.EngineVLLM, 1))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "two restarts of the engine", func() (bool, string) {
		for _, p := range c.Kubelet().ListStatus(d.Namespace(), map[string]string{api.LabelComponent: "server"}) {
			if cs, ok := p.Container(api.ContainerEngine); ok && cs.RestartCount >= 2 {
				return true, ""
			}
		}
		return false, "no restarts yet"
	})
	if got := costOf(t, d); got != (clusters.Cost{EnginePodsStarted: 1}) {
		t.Fatalf("cost of a crash-looping engine: %+v, want 1 started, 0 ready", got)
	}
}

func crashingEngine() programs.Registry {
	p := fakePrograms
	p.VLLM = simtest.Crasher
	return p
}
