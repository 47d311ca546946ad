package api

import (
	"strings"
	"testing"
)

func readyMD() *ModelDeployment {
	two := int32(2)
	return &ModelDeployment{
		Metadata: ObjectMeta{Name: "md", Generation: 3},
		Spec: ModelDeploymentSpec{
			Router: &Router{Name: RouterVLLM},
			Roles:  []Role{{Name: "server", Replicas: &two}},
		},
		Status: ModelDeploymentStatus{
			Phase: PhaseReady,
			Conditions: []Condition{{Type: ConditionRouterReady, Status: "True", Reason: ReasonReady, ObservedGeneration: 3},
				{Type: ConditionRoleKindsReady, Status: "True", Reason: ReasonAllKindsReady, ObservedGeneration: 3}},
			Roles: []RoleStatus{{Name: "server", Desired: 2, Ready: 2,
				Endpoints: &RoleEndpoints{Serving: ServingState{State: ServingConfirmed, Value: &two}}}},
		},
	}
}

func TestReadinessGapsNoneWhenEveryConditionHolds(t *testing.T) {
	if gaps := ReadinessGaps(readyMD()); gaps != nil {
		t.Fatalf("gaps = %v, want none", gaps)
	}
}

// Each broken condition must show up as its own gap naming it.
func TestReadinessGapsNameEachMissingCondition(t *testing.T) {
	one := int32(1)
	cases := map[string]struct {
		mutate func(*ModelDeployment)
		want   string
	}{
		"stale status": {func(m *ModelDeployment) { m.Metadata.Generation = 4 }, "generation 3, spec is at 4"},
		"one stale condition": {func(m *ModelDeployment) {
			m.Metadata.Generation = 4
			m.Status.Conditions[0].ObservedGeneration = 4
		}, "generation 3, spec is at 4"},
		"phase": {func(m *ModelDeployment) { m.Status.Phase = PhaseStarting }, "phase is Starting"},
		"router not ready": {func(m *ModelDeployment) {
			m.Status.Conditions[0] = Condition{Type: ConditionRouterReady, Status: "False", Reason: ReasonNoReadyReplicas}
		}, "RouterReady=False/NoReadyReplicas"},
		"router unreported": {func(m *ModelDeployment) { m.Status.Conditions = nil }, "RouterReady not reported"},
		"role missing":      {func(m *ModelDeployment) { m.Status.Roles = nil }, "role server: no status yet"},
		"instances":         {func(m *ModelDeployment) { m.Status.Roles[0].Ready = 1 }, "1 of 2 instances ready"},
		"serving state":     {func(m *ModelDeployment) { m.Status.Roles[0].Endpoints.Serving.State = ServingNotConverged }, "serving.state is NotConverged"},
		"serving count":     {func(m *ModelDeployment) { m.Status.Roles[0].Endpoints.Serving.Value = &one }, "the router serves 1 endpoints, want 2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			md := readyMD()
			tc.mutate(md)
			gaps := ReadinessGaps(md)
			if !strings.Contains(strings.Join(gaps, "; "), tc.want) {
				t.Fatalf("gaps = %q, want one containing %q", gaps, tc.want)
			}
		})
	}
}

// The operator's status has no observedGeneration (a real API server prunes
// one), so a stale status shows only in its conditions' observedGeneration:
// the gap must come from there, and a status written without generations
// (an operator that does not set them) is not held against readiness.
func TestReadinessGapsReadGenerationFromConditions(t *testing.T) {
	md := readyMD()
	md.Metadata.Generation = 4
	if gaps := ReadinessGaps(md); len(gaps) != 1 || !strings.Contains(gaps[0], "status describes generation 3, spec is at 4") {
		t.Errorf("gaps = %q, want the stale generation from the conditions", gaps)
	}
	for i := range md.Status.Conditions {
		md.Status.Conditions[i].ObservedGeneration = 0
	}
	if gaps := ReadinessGaps(md); gaps != nil {
		t.Errorf("conditions without observedGeneration: gaps = %q, want none", gaps)
	}
}
