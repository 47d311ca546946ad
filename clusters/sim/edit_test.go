package sim_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
)

func engineUIDs(t *testing.T, d clusters.Deployment) map[string]string {
	t.Helper()
	rs, err := d.Replicas(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return clusters.ReplicaUIDs(rs)
}

// Right after an edit the readiness gate still holds through the old
// router Pod (RouterReady counts any ready one): WaitReady must not return
// before the new Pod serves alone.
func TestWaitReadyAfterAnEditMeansTheNewRouterPodAlone(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("ready-edit", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 20*time.Second)
	before, _ := d.RouterState(ctx)
	for i, args := range [][]string{{"--policy", "round_robin"}, nil, {"--policy", "random"}} {
		if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = args }); err != nil {
			t.Fatal(err)
		}
		if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		after, _ := d.RouterState(ctx)
		if len(after) != 1 || after[0].UID == before[0].UID || !after[0].Ready {
			t.Fatalf("edit %d to %q: router Pods right after WaitReady %v (before %v), want one new Ready Pod", i, args, after, before)
		}
		before = after
	}
}

// A refused value edited into a running deployment is a failed rollout, as
// a RollingUpdate with surge 1 and unavailable 0 keeps it: the new router
// Pod crash-loops and is never Ready while the old one keeps serving and
// RouterReady stays True; edited back, the old revision is current again,
// the refusing Pod goes, and the old Pod, never replaced, serves alone. The
// engines are the same Pods throughout.
func TestARefusedEditKeepsTheOldRouterPodServing(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("refused-edit", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 30*time.Second)
	engines := engineUIDs(t, d)
	old, _ := d.RouterState(ctx)
	if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = []string{"--policy", "roundrobin"} }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the new router Pod crash-looping beside the old one", func() (bool, string) {
		ps, _ := d.RouterState(ctx)
		var oldReady, crashed bool
		for _, p := range ps {
			oldReady = oldReady || (p.UID == old[0].UID && p.Ready)
			crashed = crashed || (p.UID != old[0].UID && !p.Ready && p.LastExitCode != nil && *p.LastExitCode == 2)
		}
		return len(ps) == 2 && oldReady && crashed, fmt.Sprint(ps)
	})
	obj, _ := d.Object(ctx)
	if c := obj.Status.FindCondition(api.ConditionRouterReady); c == nil || c.Status != "True" {
		t.Errorf("RouterReady during the failed rollout: %+v, want True (the old Pod is ready)", c)
	}
	err := d.WaitReady(ctx, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "last exit code 2") {
		t.Fatalf("WaitReady with the refused args = %v, want it to stop on the refusal", err)
	}
	if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = nil }); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if now, _ := d.RouterState(ctx); len(now) != 1 || now[0].UID != old[0].UID {
		t.Fatalf("router Pods after the edit back: %v, want the old one alone (%s)", now, old[0].UID)
	}
	if after := engineUIDs(t, d); !maps.Equal(engines, after) {
		t.Errorf("engine Pods %v -> %v: a router edit replaced them", engines, after)
	}
}

// The test-only knob makes the emulated operator unlike the real one: a
// router edit replaces every engine Pod. Off, nothing does.
func TestTestOnlyReplaceEnginesOnRouterEdit(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := newCluster(t, sim.Options{TestOnlyReplaceEnginesOnRouterEdit: on})
		d := deployReady(t, c, md(fmt.Sprintf("knob-%t", on), api.RouterVLLM, api.EngineVLLM, 2))
		ctx := ctxT(t, 30*time.Second)
		before := engineUIDs(t, d)
		if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = []string{"--policy", "random"} }); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the deployment whole after the edit", func() (bool, string) {
			err := d.WaitReady(ctxT(t, time.Second), 10*time.Millisecond)
			after := engineUIDs(t, d)
			kept := 0
			for name, uid := range before {
				if after[name] == uid {
					kept++
				}
			}
			if on {
				return err == nil && kept == 0, fmt.Sprintf("%v, %d of %d engine Pods kept", err, kept, len(before))
			}
			return err == nil && kept == len(before), fmt.Sprintf("%v, %d of %d engine Pods kept", err, kept, len(before))
		})
	}
}
