package framework

// A plan's projected cost on a GPU cluster, under the cost model of
// e2e.yaml: what make plan prints before a run, and what the report sets
// beside what the run measured.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// Project is the plan's projected cost under cfg's cost model with
// processes Ginkgo processes. Each deployment holds its accelerators (as
// fixtures builds it for cfg) from its creation to its deletion: its
// engine start-up (the Pods start together), then each case's traffic
// time and each router edit; a replacement engine Pod adds a start-up. A
// process holds one deployment at a time, so the peak is the largest
// deployments, one per process.
func (p Plan) Project(cfg *config.Config, processes int) (report.CostProjection, error) {
	m := cfg.CostModel
	processes = max(processes, 1)
	cost := p.Cost(cfg.Replicas)
	out := report.CostProjection{Model: m.Words(), ModelDeployments: cost.ModelDeployments, EnginePods: cost.EnginePods,
		RouterEdits: cost.RouterEdits, Processes: processes}
	var longest float64
	var peaks []int64
	for _, pp := range p.Pairs {
		for _, pd := range pp.projected() {
			md, err := fixtures.ModelDeployment(cfg, pp.Pair, deploymentOptions(pd.Name, pd.Deployment, pd.RouterArgs)...)
			if err != nil {
				return out, fmt.Errorf("%s: %w", pd.Name, err)
			}
			var acc, perPod int64
			for _, r := range md.Spec.Roles {
				acc += kube.RoleAccelerators(r)
				perPod = max(perPod, kube.PodAccelerators(r))
			}
			// Ready: the cases and the edits, with every engine Pod held
			// (a replacement's start-up is its claim's traffic time).
			ready := time.Duration(pd.edits) * m.RouterRollout.D()
			for _, u := range pd.uses {
				ready += m.TrafficOf(u.Claim.Name)
			}
			pods := pd.EnginePods(cfg.Replicas) + pd.ExtraEnginePods
			loading := float64(pods) * float64(perPod) * m.EngineStartup.D().Minutes()
			held := m.EngineStartup.D() + ready
			gpu := loading + float64(acc)*ready.Minutes()
			out.GPUMinutesLoading += loading
			out.GPUMinutesReady += float64(acc) * ready.Minutes()
			out.WallMinutes += held.Minutes()
			longest = max(longest, held.Minutes())
			// At peak a replacement Pod may start before the one it
			// replaces has let its accelerators go.
			peaks = append(peaks, acc+int64(pd.ExtraEnginePods)*perPod)
			out.Deployments = append(out.Deployments, report.ProjectedDeployment{Pair: pp.Pair.String(), Name: pd.Name, Shape: shapeWords(md),
				CreatedWith: pd.RouterArgs, EnginePods: pods, Accelerators: acc + int64(pd.ExtraEnginePods)*perPod,
				Cases: len(pd.uses), RouterEdits: pd.edits, Minutes: held.Minutes(), GPUMinutes: gpu})
		}
	}
	slices.SortFunc(peaks, func(a, b int64) int { return cmp.Compare(b, a) })
	for i, a := range peaks {
		if i == 0 {
			out.PeakAcceleratorsPerProcess = a
		}
		if i < processes {
			out.PeakAccelerators += a
		}
	}
	out.WallMinutes = max(out.WallMinutes/float64(processes), longest)
	return out, nil
}

// plannedUse is a planned deployment with the cases it serves and the
// router edits it gets.
type plannedUse struct {
	PlannedDeployment
	uses  []Use
	edits int
}

// projected lists the pair's deployments as the spec tree meets them
// (the longest shared one first, then the rest, then the cases alone).
func (pp PairPlan) projected() []plannedUse {
	var out []plannedUse
	shared := slices.Clone(pp.Shared)
	slices.SortStableFunc(shared, func(a, b SharedDeployment) int { return len(b.Uses) - len(a.Uses) })
	for _, s := range shared {
		out = append(out, plannedUse{PlannedDeployment: s.PlannedDeployment, uses: s.Uses, edits: s.Edits()})
	}
	for _, u := range pp.Alone {
		if u.Own != nil {
			out = append(out, plannedUse{PlannedDeployment: *u.Own, uses: []Use{u}})
		}
	}
	return out
}

// shapeWords says what engines md runs: "2 servers", "2 prefill + 2 decode".
func shapeWords(md *api.ModelDeployment) string {
	var parts []string
	for _, r := range md.Spec.Roles {
		kind := "servers"
		if k := r.RoleKind(); k != api.RoleKindServer {
			kind = strings.ToLower(k)
		}
		parts = append(parts, fmt.Sprintf("%d %s", r.RoleReplicas(), kind))
	}
	return strings.Join(parts, " + ")
}

// PlanFor is the plan of a run with cfg: its configured pairs, the cases
// labelFilter selects (a Ginkgo label filter; "" selects every one) and
// E2E_ISOLATE as set. GINKGO_FOCUS and GINKGO_SKIP select by spec text,
// which a plan does not know: they are not modelled.
func (r *Registry) PlanFor(cfg *config.Config, labelFilter string) (Plan, error) {
	isolate, err := Isolated()
	if err != nil {
		return Plan{}, err
	}
	var pairs []api.Pair
	for _, p := range fixtures.DocumentedPairs {
		if slices.Contains(cfg.Pairs(), p) {
			pairs = append(pairs, p)
		}
	}
	plan := r.Plan(pairs, isolate)
	if strings.TrimSpace(labelFilter) == "" {
		return plan, nil
	}
	filter, err := types.ParseLabelFilter(labelFilter)
	if err != nil {
		return Plan{}, fmt.Errorf("label filter %q: %w", labelFilter, err)
	}
	return plan.Only(func(u Use) bool { return filter(u.Labels) }), nil
}
