package api

import "fmt"

// ReadinessGaps lists, in words a user can act on, every readiness condition
// md does not meet yet; nil means Ready. The gate is the operator's own
// (docs/operator.md#gotchas): status has observed the current generation
// (every condition's observedGeneration; status has no observedGeneration
// of its own), phase is
// Ready, RouterReady is True when a router is declared, and every role has its
// desired instances ready and endpoints.serving Confirmed at that count — a
// successful answer alone does not prove the router registered every replica.
// Both targets use it, so "Ready" means the same on the sim and on a cluster.
func ReadinessGaps(md *ModelDeployment) []string {
	var gaps []string
	st := md.Status
	if seen := observedGeneration(st); seen != 0 && seen < md.Metadata.Generation {
		gaps = append(gaps, fmt.Sprintf("status describes generation %d, spec is at %d", seen, md.Metadata.Generation))
	}
	if st.Phase != PhaseReady {
		g := fmt.Sprintf("phase is %s, want %s", orNone(st.Phase), PhaseReady)
		if st.PhaseMessage != "" {
			g += ": " + st.PhaseMessage
		}
		gaps = append(gaps, g)
	}
	routed := md.Spec.Router != nil
	if routed {
		c := st.FindCondition(ConditionRouterReady)
		switch {
		case c == nil:
			gaps = append(gaps, "condition RouterReady not reported")
		case c.Status != "True":
			g := fmt.Sprintf("RouterReady=%s/%s", c.Status, c.Reason)
			if c.Message != "" {
				g += ": " + c.Message
			}
			gaps = append(gaps, g)
		}
	}
	for _, r := range md.Spec.Roles {
		rs := findRoleStatus(st.Roles, r.Name)
		if rs == nil {
			gaps = append(gaps, fmt.Sprintf("role %s: no status yet", r.Name))
			continue
		}
		desired := rs.Desired
		if desired == 0 {
			desired = r.RoleReplicas()
		}
		if rs.Ready < desired {
			gaps = append(gaps, fmt.Sprintf("role %s: %d of %d instances ready", r.Name, rs.Ready, desired))
		}
		switch {
		case rs.Endpoints == nil:
			gaps = append(gaps, fmt.Sprintf("role %s: endpoints.serving not reported", r.Name))
		case !routed && rs.Endpoints.Serving.State == ServingNotConfigured:
			// Without a router nothing serves a routing view to confirm.
		case rs.Endpoints.Serving.State != ServingConfirmed:
			gaps = append(gaps, fmt.Sprintf("role %s: endpoints.serving.state is %s, want %s", r.Name, orNone(rs.Endpoints.Serving.State), ServingConfirmed))
		case rs.Endpoints.Serving.Value == nil:
			gaps = append(gaps, fmt.Sprintf("role %s: endpoints.serving is Confirmed without a value", r.Name))
		case *rs.Endpoints.Serving.Value != desired:
			gaps = append(gaps, fmt.Sprintf("role %s: the router serves %d endpoints, want %d", r.Name, *rs.Endpoints.Serving.Value, desired))
		}
	}
	if c := st.FindCondition(ConditionQuotaReserved); len(gaps) > 0 && c != nil && c.Status != "True" {
		// Not a readiness condition of its own, but the reason Pods are not
		// even scheduled (no LocalQueue, quota taken): say it.
		g := fmt.Sprintf("QuotaReserved=%s/%s", c.Status, c.Reason)
		if c.Message != "" {
			g += ": " + c.Message
		}
		gaps = append(gaps, g)
	}
	return gaps
}

// observedGeneration is the oldest generation a condition reports having
// observed, or 0 when none reports one.
func observedGeneration(st ModelDeploymentStatus) int64 {
	var oldest int64
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 0 && (oldest == 0 || c.ObservedGeneration < oldest) {
			oldest = c.ObservedGeneration
		}
	}
	return oldest
}

func findRoleStatus(roles []RoleStatus, name string) *RoleStatus {
	for i := range roles {
		if roles[i].Name == name {
			return &roles[i]
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
