package operator

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/api"
)

// Condition types and reasons the sim also publishes (api names the rest).
const (
	ConditionCacheAttached = "CacheAttached"
	ReasonReserved         = "Reserved"
	ReasonUpToDate         = "UpToDate"
	ReasonRolloutProgress  = "RolloutInProgress"
)

// DefaultServingValidity is how long one observation of the routers' view
// stays valid before serving reads Unknown (docs/operator.md#role-status-and-serving-view: 15 s).
const DefaultServingValidity = 15 * time.Second

// Observation is what the controller saw of the cluster on one pass.
type Observation struct {
	Now      time.Time
	Deleting bool
	Roles    []RoleObservation
	// RouterPods are the router Pods that exist (any template hash).
	RouterPods []RouterPodObservation
	// RouterViews are the answers of GET /observer/endpoints, one per
	// router Pod asked (each on its own address).
	RouterViews []RouterView
	// ServingValidity bounds the age of a RouterView (0 = DefaultServingValidity).
	ServingValidity time.Duration
}

// RoleObservation is the engine Pods of one role (leaders).
type RoleObservation struct {
	Name string
	Pods []EnginePodObservation
}

// EnginePodObservation is one engine Pod.
type EnginePodObservation struct {
	Name     string
	IP       string
	Ready    bool
	Deleting bool
	// UpToDate is false when the Pod's spec hash is not the current render.
	UpToDate bool
}

// RouterPodObservation is one router Pod.
type RouterPodObservation struct {
	Name         string
	Ready        bool
	Deleting     bool
	UpToDate     bool
	Waiting      string
	Restarts     int32
	LastExitCode *int32
}

// RouterView is one router Pod's answer to GET /observer/endpoints.
type RouterView struct {
	Pod        string
	ObservedAt time.Time
	// Err is set when the router did not answer (or answered garbage).
	Err     error
	Workers []ObservedWorker
}

// ObservedWorker is one workers[] entry of the observer view.
type ObservedWorker struct {
	URL         string
	Role        string
	PodHint     string
	InSelection bool
}

// ComputeStatus derives status from the spec (defaulted) and one
// observation. prev carries the last published status so that condition
// transition times only move when a condition's status changes.
func ComputeStatus(md *api.ModelDeployment, prev *api.ModelDeploymentStatus, obs Observation) api.ModelDeploymentStatus {
	if obs.Now.IsZero() {
		obs.Now = time.Now()
	}
	validity := obs.ServingValidity
	if validity <= 0 {
		validity = DefaultServingValidity
	}
	// Status has no observedGeneration; each condition carries it (below).
	st := api.ModelDeploymentStatus{}
	byRole := map[string]RoleObservation{}
	for _, r := range obs.Roles {
		byRole[r.Name] = r
	}

	routed := md.Spec.Router != nil
	readyRouters, liveRouters := 0, 0
	for _, p := range obs.RouterPods {
		if p.Deleting {
			continue
		}
		liveRouters++
		if p.Ready {
			readyRouters++
		}
	}

	allRolesReady, anyReady, rolledOut := true, false, true
	kindsReady := map[string]int32{}
	var kindOrder []string
	var missing []string
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		ro := byRole[role.Name]
		// The sim has no Kueue: every replica's quota is reserved (QuotaReserved
		// True/Reserved below), so the count is the desired one.
		rs := api.RoleStatus{Name: role.Name, Kind: role.RoleKind(), Desired: role.RoleReplicas(),
			QuotaReserved: role.RoleReplicas(), Unmanaged: len(role.Command) > 0}
		for _, p := range ro.Pods {
			if p.Ready && !p.Deleting {
				rs.Ready++
			}
			if !p.UpToDate {
				rolledOut = false
			}
		}
		eligible := rs.Ready
		rs.Endpoints = &api.RoleEndpoints{Eligible: &eligible, Serving: servingState(routed, ro, obs, validity)}
		if rs.Ready != rs.Desired {
			allRolesReady = false
			missing = append(missing, fmt.Sprintf("role %s: %d of %d instances ready", role.Name, rs.Ready, rs.Desired))
		}
		if rs.Ready > 0 {
			anyReady = true
		}
		if _, seen := kindsReady[rs.Kind]; !seen {
			kindOrder = append(kindOrder, rs.Kind)
		}
		kindsReady[rs.Kind] += rs.Ready
		st.Roles = append(st.Roles, rs)
	}

	routerOK := !routed || readyRouters > 0
	if routed && !routerOK {
		missing = append(missing, fmt.Sprintf("router: 0 of %d replicas ready", md.Spec.Router.RouterReplicas()))
	}
	switch {
	case obs.Deleting:
		st.Phase = api.PhaseDeleting
		st.PhaseMessage = "the deployment is being deleted"
	case allRolesReady && routerOK:
		st.Phase = api.PhaseReady
		st.PhaseMessage = "every role is ready"
		if routed {
			st.PhaseMessage += " and the router has a ready replica"
		}
	case !anyReady:
		st.Phase = api.PhaseStarting
		st.PhaseMessage = strings.Join(missing, "; ")
	default:
		st.Phase = api.PhaseDegraded
		st.PhaseMessage = strings.Join(missing, "; ")
	}

	var summary strings.Builder
	if routed {
		fmt.Fprintf(&summary, "%dR", readyRouters)
	}
	for _, k := range kindOrder {
		fmt.Fprintf(&summary, "%d%s", kindsReady[k], k[:1])
	}
	st.RoleSummary = summary.String()

	if routed {
		st.Router = RouterContract(md)
		if readyRouters > 0 && !obs.Deleting {
			st.Endpoint = RouterEndpoint(md)
		}
	} else if len(st.Roles) > 0 && st.Roles[0].Ready > 0 && !obs.Deleting {
		st.Endpoint = DeploymentEndpoint(md)
	}

	conds := []api.Condition{routerReadyCondition(md, obs, readyRouters, liveRouters)}
	conds = append(conds, roleKindsCondition(st.Roles, kindOrder, kindsReady))
	for _, p := range obs.RouterPods {
		if !p.UpToDate {
			rolledOut = false
		}
	}
	if rolledOut {
		conds = append(conds, api.Condition{Type: api.ConditionReplicasUpToDate, Status: "True",
			Reason: ReasonUpToDate, Message: "every replica runs the current spec"})
	} else {
		conds = append(conds, api.Condition{Type: api.ConditionReplicasUpToDate, Status: "False",
			Reason: ReasonRolloutProgress, Message: "replicas built from an earlier spec are being replaced"})
	}
	conds = append(conds, api.Condition{Type: api.ConditionQuotaReserved, Status: "True", Reason: ReasonReserved,
		Message: "the sim target admits every replica without a queue"})
	if md.Spec.KVCache == nil {
		conds = append(conds, api.Condition{Type: ConditionCacheAttached, Status: "True",
			Reason: api.ReasonNotApplicable, Message: "spec.kvCache is not set"})
	}
	for i := range conds {
		conds[i].ObservedGeneration = md.Metadata.Generation
		conds[i].LastTransitionTime = obs.Now.UTC().Format(time.RFC3339)
		if prev != nil {
			if old := prev.FindCondition(conds[i].Type); old != nil && old.Status == conds[i].Status &&
				old.LastTransitionTime != "" {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	st.Conditions = conds
	return st
}

func routerReadyCondition(md *api.ModelDeployment, obs Observation, ready, live int) api.Condition {
	c := api.Condition{Type: api.ConditionRouterReady}
	switch {
	case md.Spec.Router == nil:
		c.Status, c.Reason, c.Message = "True", api.ReasonNotApplicable, "spec.router is not set"
	case live == 0:
		c.Status, c.Reason, c.Message = "Unknown", api.ReasonNotDeployed, "no router Pod exists yet"
	case ready > 0:
		c.Status, c.Reason = "True", api.ReasonReady
		c.Message = fmt.Sprintf("%d of %d router replicas are ready", ready, md.Spec.Router.RouterReplicas())
	default:
		c.Status, c.Reason = "False", api.ReasonNoReadyReplicas
		var why []string
		for _, p := range obs.RouterPods {
			if p.Deleting {
				continue
			}
			s := "pod " + p.Name + ": not ready"
			if p.Waiting != "" {
				s = fmt.Sprintf("pod %s: container is waiting: %s", p.Name, p.Waiting)
			}
			if p.LastExitCode != nil {
				s += fmt.Sprintf(" (last exit code %d, %d restarts)", *p.LastExitCode, p.Restarts)
			}
			why = append(why, s)
		}
		c.Message = fmt.Sprintf("0 of %d router replicas are ready: %s",
			md.Spec.Router.RouterReplicas(), strings.Join(why, "; "))
	}
	return c
}

func roleKindsCondition(roles []api.RoleStatus, kinds []string, ready map[string]int32) api.Condition {
	c := api.Condition{Type: api.ConditionRoleKindsReady}
	if len(roles) == 0 {
		c.Status, c.Reason, c.Message = "Unknown", api.ReasonNoRoleStatuses, "no role has a status yet"
		return c
	}
	var notReady []string
	for _, k := range kinds {
		if ready[k] == 0 {
			notReady = append(notReady, k)
		}
	}
	if len(notReady) == 0 {
		c.Status, c.Reason, c.Message = "True", api.ReasonAllKindsReady, "every declared kind has a ready instance"
		return c
	}
	c.Status, c.Reason = "False", api.ReasonKindsNotReady
	c.Message = "no ready instance of kind " + strings.Join(notReady, ", ")
	return c
}

// servingState compares what each router Pod says it routes to for one role:
// Confirmed (with the count) when every router Pod answered recently and they
// agree on the number of in-selection workers of this role, NotConverged when
// they disagree, Unknown when one did not answer or none exists.
func servingState(routed bool, ro RoleObservation, obs Observation, validity time.Duration) api.ServingState {
	if !routed {
		return api.ServingState{State: api.ServingNotConfigured}
	}
	if len(obs.RouterViews) == 0 {
		return api.ServingState{State: api.ServingUnknown}
	}
	ips := map[string]bool{}
	names := map[string]bool{}
	for _, p := range ro.Pods {
		if p.IP != "" {
			ips[p.IP] = true
		}
		names[p.Name] = true
	}
	var counts []int32
	for _, v := range obs.RouterViews {
		if v.Err != nil || obs.Now.Sub(v.ObservedAt) > validity {
			return api.ServingState{State: api.ServingUnknown}
		}
		var n int32
		for _, w := range v.Workers {
			if w.InSelection && (ips[workerHost(w.URL)] || (w.PodHint != "" && names[w.PodHint])) {
				n++
			}
		}
		counts = append(counts, n)
	}
	for _, n := range counts[1:] {
		if n != counts[0] {
			return api.ServingState{State: api.ServingNotConverged}
		}
	}
	v := counts[0]
	return api.ServingState{State: api.ServingConfirmed, Value: &v}
}

func workerHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		// A bare host:port.
		if h, _, ok := strings.Cut(raw, ":"); ok {
			return h
		}
		return raw
	}
	return u.Hostname()
}
