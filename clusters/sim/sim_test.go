package sim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/simtest"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// The PUB writer of zmq4 v0.17.0 outlives its socket: vLLM Pods' KV-event
// publishers leave one each (sim/engine/vllm closePub).
var zmqPubWriter = goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, zmqPubWriter) }

var fakePrograms = programs.Registry{
	VLLMRouter: simtest.Router, SGLangGateway: simtest.Router, VLLM: simtest.Engine, SGLang: simtest.Engine,
}

// newCluster is a sim whose engines and argv routers are the simtest
// fakes unless opts names programs; realCluster runs the real emulators.
func newCluster(t testing.TB, opts sim.Options) *sim.Cluster {
	t.Helper()
	if opts.Programs.VLLM == nil && opts.Programs.VLLMRouter == nil {
		opts.Programs = fakePrograms
	}
	return startCluster(t, opts)
}

// realCluster is a sim running its own programs (nil Options.Programs)
// and the routers built from source when make routers has built them
// (without a build, a test that deploys them fails saying to run it).
func realCluster(t testing.TB, opts sim.Options) *sim.Cluster {
	t.Helper()
	if opts.Routers == nil {
		opts.Routers, _ = upstream.Load("")
	}
	return startCluster(t, opts)
}

func startCluster(t testing.TB, opts sim.Options) *sim.Cluster {
	t.Helper()
	if opts.Kubelet.BackoffInitial == 0 {
		opts.Kubelet.BackoffInitial = 20 * time.Millisecond
		opts.Kubelet.BackoffMax = 100 * time.Millisecond
	}
	c := sim.New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func md(name, router, engine string, replicas int32, extra ...string) *api.ModelDeployment {
	m := &api.ModelDeployment{
		Metadata: api.ObjectMeta{Name: name},
		Spec: api.ModelDeploymentSpec{
			Model:  api.Model{Name: "Qwen/Qwen2.5-0.5B-Instruct"},
			Engine: api.Engine{Name: engine, Version: "0.29.0"},
			Roles:  []api.Role{{Name: "server", Replicas: api.Ptr(replicas), InstanceType: "sim-gpu"}},
		},
	}
	if router != "" {
		m.Spec.Router = &api.Router{Name: router, ExtraArgs: extra}
	}
	return m
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func deployReady(t testing.TB, c *sim.Cluster, m *api.ModelDeployment) clusters.Deployment {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return d
}

func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", within, what, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDescribeReportsPairs(t *testing.T) {
	env, err := newCluster(t, sim.Options{}).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[[2]string]string{
		{api.RouterVLLM, api.EngineVLLM}:     "",
		{api.RouterSGLang, api.EngineSGLang}: "",
		{api.RouterLLMD, api.EngineVLLM}:     "",
		{api.RouterLLMD, api.EngineSGLang}:   "",
		{api.RouterVLLM, api.EngineSGLang}:   `router "vllm-router" does not front engine "SGLang"; it accepts vLLM`,
		{api.RouterSGLang, api.EngineVLLM}:   `router "sglang-gateway" does not front engine "vLLM"; it accepts SGLang`,
	}
	for pair, reason := range want {
		ok, why := env.Supports(pair[0], pair[1])
		if ok != (reason == "") || why != reason {
			t.Errorf("%v: supported=%t reason=%q, want reason %q", pair, ok, why, reason)
		}
	}
	if env.Target != "sim" || !slices.Contains(env.Notes, "llm-d-router v0.10.0 epp + envoy (simulated)") {
		t.Errorf("environment: %+v", env)
	}

	bare := sim.New(sim.Options{Programs: programs.Registry{VLLM: simtest.Engine}})
	defer bare.Close(context.Background())
	env, _ = bare.Describe(context.Background())
	if ok, why := env.Supports(api.RouterSGLang, api.EngineSGLang); ok || !strings.Contains(why, "run `make routers`") {
		t.Errorf("a pair whose router was not built: %t %q", ok, why)
	}
}

func TestDeployRefusesOnAdmission(t *testing.T) {
	c := newCluster(t, sim.Options{})
	_, err := c.Deploy(context.Background(), md("bad", api.RouterVLLM, api.EngineVLLM, 2, "--port=9000"))
	var ae *clusters.AdmissionError
	if !errors.As(err, &ae) || ae.Field != "spec.router.extraArgs[0]" {
		t.Fatalf("want an admission refusal, got %v", err)
	}
	if len(c.Kubelet().ListStatus("", nil)) != 0 {
		t.Fatal("a refused deployment created Pods")
	}
	for _, args := range [][]string{{"--config-file=/x"}, {"--config-file", "/x"}, {"--endpoint-selector=a=b"}} {
		m := md("llmd", api.RouterLLMD, api.EngineVLLM, 2, args...)
		if _, err := c.Deploy(context.Background(), m); !errors.As(err, &ae) ||
			!strings.Contains(ae.Message, `is set by the operator for router "llm-d-router"`) {
			t.Fatalf("llm-d owned flag %q: %v", args, err)
		}
	}
	if len(c.Kubelet().ListStatus("", nil)) != 0 {
		t.Fatal("a refused llm-d deployment created Pods")
	}
}

func TestDeployRendersOperatorObjects(t *testing.T) {
	c := newCluster(t, sim.Options{Namespace: func() string { return "team-a" }})
	m := md("qwen", api.RouterVLLM, api.EngineVLLM, 2, "--policy", "round_robin")
	d := deployReady(t, c, m)
	obj, err := d.Object(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := obj.Status
	if st.Phase != api.PhaseReady || st.RoleSummary != "1R2S" || st.Endpoint != "http://qwen-router.team-a.svc:8081" {
		t.Fatalf("status: phase %s summary %s endpoint %s", st.Phase, st.RoleSummary, st.Endpoint)
	}
	if rr := st.FindCondition(api.ConditionRouterReady); rr.Status != "True" || rr.Reason != api.ReasonReady {
		t.Fatalf("RouterReady: %+v", rr)
	}
	if s := st.Roles[0].Endpoints.Serving; s.State != api.ServingConfirmed || *s.Value != 2 {
		t.Fatalf("serving: %+v", s)
	}
	if st.Router == nil || st.Router.Roles[0].Selector[api.LabelRoleKind] != "server" {
		t.Fatalf("status.router: %+v", st.Router)
	}

	wantArgs, _ := operator.RenderRouterArgs(obj)
	routers := c.Kubelet().ListStatus("team-a", map[string]string{api.LabelRouter: api.RouterVLLM})
	if len(routers) != 1 || !strings.HasPrefix(routers[0].Name, "qwen-router-") ||
		len(strings.Split(routers[0].Name, "-")) != 4 {
		t.Fatalf("router Pod naming <md>-router-<hash>-<rand>: %+v", routers)
	}
	desc := c.Kubelet().Describe("team-a", routers[0].Name)
	if !strings.Contains(desc, "Command:        vllm-router "+strings.Join(wantArgs, " ")) {
		t.Fatalf("router container runs the rendered argv:\n%s", desc)
	}
	engines := c.Kubelet().ListStatus("team-a", map[string]string{api.LabelComponent: "server"})
	if len(engines) != 2 {
		t.Fatalf("engines: %d", len(engines))
	}
	for _, e := range engines {
		if !strings.HasPrefix(e.Name, "qwen-server-") || len(e.Name) != len("qwen-server-")+5 ||
			e.Labels[api.LabelMember] != "0" || e.Annotations[api.AnnotationPromPort] != "8000" {
			t.Errorf("engine Pod %s: %v %v", e.Name, e.Labels, e.Annotations)
		}
	}
	logs, err := d.RouterLogs(context.Background(), clusters.LogOptions{})
	if err != nil || !strings.Contains(logs, "policy: round_robin") {
		t.Fatalf("router logs: %q %v", logs, err)
	}
}

func TestStatusEndpointOnlyWhenRouterReady(t *testing.T) {
	c := newCluster(t, sim.Options{})
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, md("ep", api.RouterSGLang, api.EngineSGLang, 1, "--policy", "nope"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "engines ready with a broken router", func() (bool, string) {
		obj, _ := d.Object(ctx)
		return obj.Status.Roles != nil && obj.Status.Roles[0].Ready == 1 &&
			obj.Status.FindCondition(api.ConditionRouterReady).Status == "False", obj.Status.PhaseMessage
	})
	obj, _ := d.Object(ctx)
	if obj.Status.Endpoint != "" || obj.Status.Phase != api.PhaseDegraded {
		t.Fatalf("endpoint %q phase %s with no ready router", obj.Status.Endpoint, obj.Status.Phase)
	}
	if err := d.Update(ctx, func(m *api.ModelDeployment) {
		m.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	obj, _ = d.Object(ctx)
	if !strings.HasPrefix(obj.Status.Endpoint, "http://ep-router.") || !strings.HasSuffix(obj.Status.Endpoint, ".svc:8081") {
		t.Fatalf("endpoint once the router is ready: %q", obj.Status.Endpoint)
	}
}

func TestRouterCrashShowsRouterReadyFalseAndRestarts(t *testing.T) {
	c := newCluster(t, sim.Options{})
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, md("crash", api.RouterVLLM, api.EngineVLLM, 2, "--policy", "roundrobin"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a crash-looping router", func() (bool, string) {
		ps, err := d.RouterState(ctx)
		if err != nil || len(ps) != 1 {
			return false, fmt.Sprint(ps, err)
		}
		p := ps[0]
		return p.Restarts >= 2 && p.Waiting == "CrashLoopBackOff" && p.LastExitCode != nil &&
			*p.LastExitCode == 2 && !p.Ready, fmt.Sprintf("%+v", p)
	})
	eventually(t, 5*time.Second, "RouterReady False/NoReadyReplicas", func() (bool, string) {
		obj, _ := d.Object(ctx)
		rr := obj.Status.FindCondition(api.ConditionRouterReady)
		return rr != nil && rr.Status == "False" && rr.Reason == api.ReasonNoReadyReplicas &&
			strings.Contains(rr.Message, "CrashLoopBackOff"), fmt.Sprintf("%+v", rr)
	})
	prev, err := d.RouterLogs(ctx, clusters.LogOptions{Previous: true})
	if err != nil || !strings.Contains(prev, "error: invalid value 'roundrobin' for '--policy <POLICY>'") {
		t.Fatalf("previous router log: %q %v", prev, err)
	}
	if _, err := d.OpenAIBaseURL(ctx); err == nil || !strings.Contains(err.Error(), "NoReadyReplicas") {
		t.Fatalf("no base URL without a ready router: %v", err)
	}
	// WaitReady gives up at once on a router that refuses its arguments, long
	// before its deadline, and says why and what else is missing.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = d.WaitReady(wctx, 10*time.Millisecond)
	if err == nil || wctx.Err() != nil || !strings.Contains(err.Error(), "last exit code 2") || !strings.Contains(err.Error(), "RouterReady=False") {
		t.Fatalf("WaitReady names the refused arguments and what is missing, before its deadline: %v", err)
	}
}

// Right after an edit that fixes the arguments, the old router Pod still
// crash-loops with exit 2 beside (or before) the new one: a rollout in
// progress, which WaitReady waits out instead of giving up.
func TestWaitReadyWaitsOutTheOldTemplatesRefusingRouter(t *testing.T) {
	c := newCluster(t, sim.Options{})
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, md("fix", api.RouterVLLM, api.EngineVLLM, 1, "--policy", "roundrobin"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a router refusing its arguments", func() (bool, string) {
		ps, _ := d.RouterState(ctx)
		return len(ps) == 1 && ps[0].Waiting == "CrashLoopBackOff" && ps[0].LastExitCode != nil &&
			*ps[0].LastExitCode == 2, fmt.Sprint(ps)
	})
	if err := d.Update(ctx, func(m *api.ModelDeployment) {
		m.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatalf("WaitReady after the fix: %v", err)
	}
}

func TestPreviousLogsAfterCrash(t *testing.T) {
	c := newCluster(t, sim.Options{})
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, md("prev", api.RouterVLLM, api.EngineVLLM, 1, "--policy", "x"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a restart", func() (bool, string) {
		ps, _ := d.RouterState(ctx)
		return len(ps) == 1 && ps[0].Restarts >= 1, fmt.Sprint(ps)
	})
	const clapError = "error: invalid value 'x' for '--policy <POLICY>'"
	// Right after a restart the new container may not have written yet (its
	// log is empty then, as on a kubelet): the current log gets the error
	// within the wait, the previous one has it already.
	eventually(t, 10*time.Second, "the clap error in the current container's log", func() (bool, string) {
		cur, err := d.RouterLogs(ctx, clusters.LogOptions{})
		return err == nil && strings.Contains(cur, clapError), fmt.Sprintf("%q %v", cur, err)
	})
	prev, err := d.RouterLogs(ctx, clusters.LogOptions{Previous: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prev, clapError) {
		t.Errorf("previous log lacks the clap error: %q", prev)
	}
	since, err := d.RouterLogs(ctx, clusters.LogOptions{Since: time.Now().Add(time.Hour)})
	if err != nil || since != "" {
		t.Errorf("since the future: %q %v", since, err)
	}
}

func TestExtraArgsEditReplacesRouterPodWithNewUID(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("edit", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 20*time.Second)
	before, err := d.RouterState(ctx)
	if err != nil || len(before) != 1 {
		t.Fatalf("%v %v", before, err)
	}
	obj, _ := d.Object(ctx)
	if err := d.Update(ctx, func(m *api.ModelDeployment) {
		m.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
	}); err != nil {
		t.Fatal(err)
	}
	after, _ := d.Object(ctx)
	if after.Metadata.Generation != obj.Metadata.Generation+1 {
		t.Fatalf("generation %d -> %d", obj.Metadata.Generation, after.Metadata.Generation)
	}
	eventually(t, 10*time.Second, "a new router Pod alone", func() (bool, string) {
		ps, _ := d.RouterState(ctx)
		return len(ps) == 1 && ps[0].UID != before[0].UID && ps[0].Ready && ps[0].Name != before[0].Name,
			fmt.Sprint(ps)
	})
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	logs, _ := d.RouterLogs(ctx, clusters.LogOptions{})
	if !strings.Contains(logs, "policy: round_robin") || strings.Contains(logs, "policy: cache_aware") {
		t.Fatalf("the new Pod starts with no record of the old one: %q", logs)
	}
	// Scaling a role does not roll the router.
	now, _ := d.RouterState(ctx)
	if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Roles[0].Replicas = api.Ptr[int32](3) }); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if again, _ := d.RouterState(ctx); len(again) != 1 || again[0].UID != now[0].UID {
		t.Fatalf("a role scale replaced the router: %v -> %v", now, again)
	}
}

func TestRouterNameImmutableOnUpdate(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("imm", api.RouterVLLM, api.EngineVLLM, 1))
	err := d.Update(context.Background(), func(m *api.ModelDeployment) { m.Spec.Router.Name = api.RouterLLMD })
	var ae *clusters.AdmissionError
	if !errors.As(err, &ae) || ae.Field != "spec.router.name" || ae.Message != `Invalid value: "llm-d-router": field is immutable` {
		t.Fatalf("want field is immutable, got %v", err)
	}
}

func TestReplicasHaveDistinctAddresses(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("addr", api.RouterVLLM, api.EngineVLLM, 3))
	ctx := ctxT(t, 10*time.Second)
	rs, err := d.Replicas(ctx)
	if err != nil || len(rs) != 3 {
		t.Fatalf("%v %v", rs, err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.IP] || r.Port != 8000 || r.MetricsPort != 8000 || r.Role != "server" || r.Kind != api.RoleKindServer {
			t.Fatalf("replica %+v", r)
		}
		seen[r.IP] = true
		resp, err := http.Get(r.URL() + "/health")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v", r.URL(), err)
		}
		resp.Body.Close()
		snap, err := d.EngineMetrics(ctx, r)
		if err != nil || len(snap.Samples) == 0 {
			t.Fatalf("engine metrics: %v", err)
		}
	}
	if !slices.IsSortedFunc(rs, func(a, b clusters.Replica) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("replicas are sorted by name")
	}
}

func TestTrafficThroughRouterAndMergedMetrics(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("traffic", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 10*time.Second)
	base, err := d.OpenAIBaseURL(ctx)
	if err != nil || !strings.HasSuffix(base, ":8081/v1") {
		t.Fatalf("%q %v", base, err)
	}
	for range 4 {
		resp, err := http.Post(base+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"Qwen/Qwen2.5-0.5B-Instruct","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	snap, err := d.RouterMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, s := range snap.Samples {
		if s.Name == "fake_router_requests_total" {
			if s.Labels[metrics.SourceLabel] == "" {
				t.Fatalf("merged samples carry their Pod: %+v", s)
			}
			total += s.Value
		}
	}
	if total != 4 {
		t.Fatalf("router counted %v requests", total)
	}
}

func TestScaleDownAndUp(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("scale", api.RouterVLLM, api.EngineVLLM, 3))
	ctx := ctxT(t, 20*time.Second)
	if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Roles[0].Replicas = api.Ptr[int32](1) }); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "one replica", func() (bool, string) {
		rs, _ := d.Replicas(ctx)
		return len(rs) == 1, fmt.Sprint(rs)
	})
	rs, _ := d.Replicas(ctx)
	if p, _ := c.Kubelet().Get(d.Namespace(), rs[0].Name); p.Labels[api.LabelOrdinal] != "0" {
		t.Fatalf("scale-down keeps the lowest ordinal: %v", p.Labels)
	}
	if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Roles[0].Replicas = api.Ptr[int32](2) }); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	obj, _ := d.Object(ctx)
	if v := obj.Status.Roles[0].Endpoints.Serving.Value; v == nil || *v != 2 {
		t.Fatalf("serving after scale-up: %+v", obj.Status.Roles[0].Endpoints.Serving)
	}
}

func TestRoleEditRollsReplicasOneAtATime(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("roll", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 20*time.Second)
	before, _ := d.Replicas(ctx)
	if err := d.Update(ctx, func(m *api.ModelDeployment) {
		m.Spec.Roles[0].Env = []api.EnvVar{{Name: "SIM_ENGINE_TTFT", Value: "1ms"}}
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "both replicas replaced", func() (bool, string) {
		rs, _ := d.Replicas(ctx)
		if len(rs) != 2 {
			return false, fmt.Sprint(rs)
		}
		for _, r := range rs {
			if slices.ContainsFunc(before, func(b clusters.Replica) bool { return b.Name == r.Name }) {
				return false, fmt.Sprint(rs)
			}
		}
		obj, _ := d.Object(ctx)
		return obj.Status.FindCondition(api.ConditionReplicasUpToDate).Status == "True", "not up to date"
	})
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteShowsDeletingThenGone(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("del", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- d.Delete(ctx) }()
	eventually(t, 5*time.Second, "phase Deleting", func() (bool, string) {
		obj, err := d.Object(ctx)
		if err != nil {
			return true, "already gone" // deletion raced ahead; Delete's result is checked below
		}
		return obj.Status.Phase == api.PhaseDeleting, obj.Status.Phase
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := d.Object(ctx); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("object after delete: %v", err)
	}
	if ps := c.Kubelet().ListStatus(d.Namespace(), nil); len(ps) != 0 {
		t.Fatalf("pods left: %v", ps)
	}
	// The name is free again.
	m := md("del", api.RouterVLLM, api.EngineVLLM, 1)
	m.Metadata.Namespace = d.Namespace()
	if _, err := c.Deploy(ctx, m); err != nil {
		t.Fatal(err)
	}
}

func TestDuplicateNameRefused(t *testing.T) {
	c := newCluster(t, sim.Options{Namespace: func() string { return "same" }})
	if _, err := c.Deploy(context.Background(), md("dup", "", api.EngineVLLM, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deploy(context.Background(), md("dup", "", api.EngineVLLM, 1)); err == nil ||
		!strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestNoRouterDeployment(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("plain", "", api.EngineSGLang, 1))
	obj, _ := d.Object(context.Background())
	rr := obj.Status.FindCondition(api.ConditionRouterReady)
	if rr.Status != "True" || rr.Reason != api.ReasonNotApplicable || obj.Status.Router != nil ||
		obj.Status.Roles[0].Endpoints.Serving.State != api.ServingNotConfigured {
		t.Fatalf("status without a router: %+v", obj.Status)
	}
	if u, err := d.OpenAIBaseURL(context.Background()); err != nil || !strings.HasSuffix(u, ":8000/v1") {
		t.Fatalf("base URL without a router: %q %v", u, err)
	}
}

func TestEngineKnobsReachEngineEnv(t *testing.T) {
	c := newCluster(t, sim.Options{Engine: sim.EngineKnobs{TTFT: 7 * time.Millisecond, OutputTokens: 3}})
	m := md("knobs", api.RouterVLLM, api.EngineVLLM, 1)
	m.Spec.Roles[0].Env = []api.EnvVar{{Name: "SIM_ENGINE_TTFT", Value: "2ms"}}
	d := deployReady(t, c, m)
	rs, _ := d.Replicas(context.Background())
	desc := c.Kubelet().Describe(d.Namespace(), rs[0].Name)
	if !strings.Contains(desc, "SIM_ENGINE_TTFT=2ms") || !strings.Contains(desc, "SIM_ENGINE_OUTPUT_TOKENS=3") {
		t.Fatalf("role env wins over the cluster knob, and knobs reach the Pod:\n%s", desc)
	}
}

func TestCollectArtifacts(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("art", api.RouterVLLM, api.EngineVLLM, 1))
	dir := t.TempDir()
	if err := d.CollectArtifacts(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"modeldeployment.yaml", "events.log", "pods/art-router-*.txt",
		"pods/art-server-*.txt", "logs/art-router-*/router.log", "logs/art-server-*/main.log",
		"metrics/art-router-*.txt", "metrics/art-server-*.txt"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		if len(m) == 0 {
			t.Errorf("no %s", pattern)
		}
	}
	y, _ := os.ReadFile(filepath.Join(dir, "modeldeployment.yaml"))
	if !strings.Contains(string(y), "phase: Ready") {
		t.Errorf("object yaml carries status:\n%s", y)
	}
	ev, _ := os.ReadFile(filepath.Join(dir, "events.log"))
	if !strings.Contains(string(ev), "SuccessfulCreate") || !strings.Contains(string(ev), "Started") {
		t.Errorf("events:\n%s", ev)
	}
}

func TestCloseIsIdempotentAndRefusesNewDeploys(t *testing.T) {
	c := sim.New(sim.Options{Programs: fakePrograms})
	if _, err := c.Deploy(context.Background(), md("x", api.RouterVLLM, api.EngineVLLM, 1)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deploy(ctx, md("y", api.RouterVLLM, api.EngineVLLM, 1)); err == nil {
		t.Fatal("deploy after close")
	}
}

func TestDeleteAndCloseLeaveNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), zmqPubWriter)
	c := sim.New(sim.Options{Programs: fakePrograms})
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, md("leak", api.RouterVLLM, api.EngineVLLM, 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	base, _ := d.OpenAIBaseURL(ctx)
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Post(base+"/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"p"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if err := d.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentUseIsRaceFree(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("conc", api.RouterVLLM, api.EngineVLLM, 1))
	ctx := ctxT(t, 20*time.Second)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				switch (i + j) % 4 {
				case 0:
					_ = d.Update(ctx, func(m *api.ModelDeployment) {
						m.Spec.Router.ExtraArgs = []string{"--policy", []string{"round_robin", "random"}[j%2]}
					})
				case 1:
					_, _ = d.Object(ctx)
					_ = d.Name() + d.Namespace()
				case 2:
					_, _ = d.RouterState(ctx)
					_, _ = d.Replicas(ctx)
				case 3:
					_, _ = d.RouterLogs(ctx, clusters.LogOptions{})
				}
			}
		}()
	}
	wg.Wait()
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
