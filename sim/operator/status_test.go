package operator

import (
	"errors"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
)

func twoServers() (*api.ModelDeployment, RoleObservation) {
	md := newMD(api.RouterVLLM, api.EngineVLLM)
	Default(md)
	return md, RoleObservation{Name: "server", Pods: []EnginePodObservation{
		{Name: "qwen-server-abcde", IP: "127.9.0.1", Ready: true, UpToDate: true},
		{Name: "qwen-server-fghjk", IP: "127.9.0.2", Ready: true, UpToDate: true},
	}}
}

func view(pod string, now time.Time, urls ...string) RouterView {
	v := RouterView{Pod: pod, ObservedAt: now}
	for _, u := range urls {
		v.Workers = append(v.Workers, ObservedWorker{URL: u, InSelection: true})
	}
	return v
}

func cond(t *testing.T, st api.ModelDeploymentStatus, typ string) api.Condition {
	t.Helper()
	c := st.FindCondition(typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, st.Conditions)
	}
	return *c
}

func TestStatusEndpointOnlyWhenRouterReady(t *testing.T) {
	md, role := twoServers()
	now := time.Now()
	notReady := ComputeStatus(md, nil, Observation{Now: now, Roles: []RoleObservation{role},
		RouterPods: []RouterPodObservation{{Name: "qwen-router-x-y", UpToDate: true}}})
	if notReady.Endpoint != "" {
		t.Fatalf("endpoint published before the router is ready: %q", notReady.Endpoint)
	}
	if notReady.Router == nil || notReady.Router.Endpoint == "" {
		t.Fatalf("status.router is published with spec.router")
	}
	ready := ComputeStatus(md, nil, Observation{Now: now, Roles: []RoleObservation{role},
		RouterPods: []RouterPodObservation{{Name: "qwen-router-x-y", Ready: true, UpToDate: true}}})
	if ready.Endpoint != "http://qwen-router.team-a.svc:8081" {
		t.Fatalf("endpoint: %q", ready.Endpoint)
	}
}

func TestStatusRouterReadyReasons(t *testing.T) {
	md, role := twoServers()
	exit := int32(2)
	cases := []struct {
		name           string
		md             *api.ModelDeployment
		pods           []RouterPodObservation
		status, reason string
		phase          string
	}{
		{"no router", func() *api.ModelDeployment { m := DeepCopy(md); m.Spec.Router = nil; return m }(), nil,
			"True", api.ReasonNotApplicable, api.PhaseReady},
		{"not deployed", md, nil, "Unknown", api.ReasonNotDeployed, api.PhaseDegraded},
		{"crash loop", md, []RouterPodObservation{{Name: "r", Waiting: "CrashLoopBackOff", LastExitCode: &exit,
			Restarts: 3}}, "False", api.ReasonNoReadyReplicas, api.PhaseDegraded},
		{"ready", md, []RouterPodObservation{{Name: "r", Ready: true}}, "True", api.ReasonReady, api.PhaseReady},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := ComputeStatus(c.md, nil, Observation{Roles: []RoleObservation{role}, RouterPods: c.pods})
			rr := cond(t, st, api.ConditionRouterReady)
			if rr.Status != c.status || rr.Reason != c.reason || st.Phase != c.phase {
				t.Fatalf("RouterReady %s/%s phase %s: %+v", rr.Status, rr.Reason, st.Phase, rr)
			}
		})
	}
	st := ComputeStatus(md, nil, Observation{Roles: []RoleObservation{role},
		RouterPods: []RouterPodObservation{{Name: "r", Waiting: "CrashLoopBackOff", LastExitCode: &exit}}})
	if msg := cond(t, st, api.ConditionRouterReady).Message; msg !=
		"0 of 1 router replicas are ready: pod r: container is waiting: CrashLoopBackOff (last exit code 2, 0 restarts)" {
		t.Fatalf("message: %s", msg)
	}
}

func TestStatusPhasesAndSummary(t *testing.T) {
	md, role := twoServers()
	router := []RouterPodObservation{{Name: "r", Ready: true}}
	st := ComputeStatus(md, nil, Observation{Roles: []RoleObservation{role}, RouterPods: router})
	if st.Phase != api.PhaseReady || st.RoleSummary != "1R2S" || st.Roles[0].Desired != 2 || st.Roles[0].Ready != 2 {
		t.Fatalf("ready: %+v", st)
	}
	half := role
	half.Pods = []EnginePodObservation{role.Pods[0], {Name: "b", IP: "127.9.0.2"}}
	st = ComputeStatus(md, nil, Observation{Roles: []RoleObservation{half}, RouterPods: router})
	if st.Phase != api.PhaseDegraded || st.RoleSummary != "1R1S" {
		t.Fatalf("degraded: %s %s", st.Phase, st.RoleSummary)
	}
	st = ComputeStatus(md, nil, Observation{Roles: []RoleObservation{{Name: "server"}}})
	if st.Phase != api.PhaseStarting || cond(t, st, api.ConditionRoleKindsReady).Reason != api.ReasonKindsNotReady {
		t.Fatalf("starting: %s %+v", st.Phase, st.Conditions)
	}
	st = ComputeStatus(md, nil, Observation{Deleting: true, Roles: []RoleObservation{role}, RouterPods: router})
	if st.Phase != api.PhaseDeleting || st.Endpoint != "" {
		t.Fatalf("deleting: %s %q", st.Phase, st.Endpoint)
	}
	pd := pdMD(api.RouterVLLM, api.EngineVLLM)
	Default(pd)
	st = ComputeStatus(pd, nil, Observation{RouterPods: router, Roles: []RoleObservation{
		{Name: "prefill", Pods: []EnginePodObservation{{Name: "p", Ready: true}}},
		{Name: "decode", Pods: []EnginePodObservation{{Name: "d", Ready: true}}},
	}})
	if st.RoleSummary != "1R1P1D" || cond(t, st, api.ConditionRoleKindsReady).Reason != api.ReasonAllKindsReady {
		t.Fatalf("P/D summary %q", st.RoleSummary)
	}
}

func TestStatusServingView(t *testing.T) {
	md, role := twoServers()
	now := time.Now()
	router := []RouterPodObservation{{Name: "r1", Ready: true}, {Name: "r2", Ready: true}}
	both := []string{"http://127.9.0.1:8000", "http://127.9.0.2:8000"}
	serving := func(views ...RouterView) api.ServingState {
		st := ComputeStatus(md, nil, Observation{Now: now, Roles: []RoleObservation{role}, RouterPods: router,
			RouterViews: views})
		return st.Roles[0].Endpoints.Serving
	}
	if s := serving(view("r1", now, both...), view("r2", now, both...)); s.State != api.ServingConfirmed ||
		s.Value == nil || *s.Value != 2 {
		t.Fatalf("agreeing routers: %+v", s)
	}
	if s := serving(view("r1", now, both...), view("r2", now, both[0])); s.State != api.ServingNotConverged ||
		s.Value != nil {
		t.Fatalf("disagreeing routers: %+v", s)
	}
	if s := serving(view("r1", now, both...), RouterView{Pod: "r2", ObservedAt: now, Err: errors.New("refused")}); s.State != api.ServingUnknown {
		t.Fatalf("unreachable router: %+v", s)
	}
	if s := serving(view("r1", now.Add(-time.Minute), both...)); s.State != api.ServingUnknown {
		t.Fatalf("stale view: %+v", s)
	}
	// A worker the router has but does not select, and one of another
	// deployment, do not count.
	v := view("r1", now, both[0], "http://127.200.0.9:8000")
	v.Workers = append(v.Workers, ObservedWorker{URL: both[1], InSelection: false})
	if s := serving(v); s.State != api.ServingConfirmed || *s.Value != 1 {
		t.Fatalf("selection filter: %+v", s)
	}
	md.Spec.Router = nil
	if s := serving(); s.State != api.ServingNotConfigured {
		t.Fatalf("no router: %+v", s)
	}
}

func TestConditionTransitionTimeKeptWhileStatusHolds(t *testing.T) {
	md, role := twoServers()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	router := []RouterPodObservation{{Name: "r", Ready: true}}
	a := ComputeStatus(md, nil, Observation{Now: t0, Roles: []RoleObservation{role}, RouterPods: router})
	b := ComputeStatus(md, &a, Observation{Now: t0.Add(time.Hour), Roles: []RoleObservation{role}, RouterPods: router})
	if cond(t, b, api.ConditionRouterReady).LastTransitionTime != t0.Format(time.RFC3339) {
		t.Fatalf("transition time moved without a transition")
	}
	c := ComputeStatus(md, &b, Observation{Now: t0.Add(2 * time.Hour), Roles: []RoleObservation{role}})
	if cond(t, c, api.ConditionRouterReady).LastTransitionTime == t0.Format(time.RFC3339) {
		t.Fatalf("transition time must move on a transition")
	}
}

func TestParseObserver(t *testing.T) {
	body := `{"router":{"boot_generation":3,"now_ms":1},"registry_revision":7,"workers":[
	  {"url":"http://127.9.0.1:8000","port":8000,"role":"regular","pod_hint":"qwen-server-abcde","worker_id":"w1",
	   "selection":{"registered":true,"healthy":true,"circuit_open":false,"in_selection":true}}]}`
	ws, err := ParseObserver([]byte(body))
	if err != nil || len(ws) != 1 || !ws[0].InSelection || ws[0].PodHint != "qwen-server-abcde" {
		t.Fatalf("%v %+v", err, ws)
	}
	if _, err := ParseObserver([]byte("<html>")); err == nil {
		t.Fatal("garbage must not parse")
	}
}

// The schema requires every role status to say how many replicas hold
// quota and whether the role is unmanaged; the sim reserves every replica.
func TestStatusRolesCarryQuotaAndUnmanaged(t *testing.T) {
	md, role := twoServers()
	md.Spec.Roles = append(md.Spec.Roles, api.Role{Name: "own", InstanceType: "gpu-h100",
		Replicas: api.Ptr[int32](3), Command: []string{"vllm", "serve", "m"}})
	st := ComputeStatus(md, nil, Observation{Now: time.Now(), Roles: []RoleObservation{role}})
	if len(st.Roles) != 2 {
		t.Fatalf("roles %+v", st.Roles)
	}
	if r := st.Roles[0]; r.QuotaReserved != 2 || r.Unmanaged || r.Kind != api.RoleKindServer {
		t.Errorf("managed role status %+v, want quotaReserved 2, managed, kind Server", r)
	}
	if r := st.Roles[1]; r.QuotaReserved != 3 || !r.Unmanaged {
		t.Errorf("take-over role status %+v, want quotaReserved 3, unmanaged", r)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != md.Metadata.Generation {
			t.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, md.Metadata.Generation)
		}
	}
}

// llm-d's observer (on the EPP's metrics port) writes port as a string and
// a last_job journal for recently dispatched endpoints.
func TestParseObserverOfTheEPP(t *testing.T) {
	body := `{"router":{"boot_generation":17,"now_ms":5},"registry_revision":3,"workers":[` +
		`{"url":"http://10.0.0.1:8000","port":"8000","role":"server","pod_hint":"p-1","worker_id":"ns/p-1-rank-0",` +
		`"selection":{"registered":true,"healthy":true,"circuit_open":false,"in_selection":true},"last_job":{"recent_dispatch":true}}]}`
	ws, err := ParseObserver([]byte(body))
	if err != nil || len(ws) != 1 || !ws[0].InSelection || ws[0].PodHint != "p-1" {
		t.Fatalf("%+v %v", ws, err)
	}
	if ObserverPort(api.RouterLLMD) != 9090 || ObserverPort(api.RouterVLLM) != 8081 || ObserverPort(api.RouterSGLang) != 8081 {
		t.Fatal("llm-d serves the view on its metrics port, the argv routers on 8081")
	}
}
