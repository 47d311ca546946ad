package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// CostModel is the GPU-cost model make plan projects a run with, and that
// the report sets beside what a kube run measured (engine Pods started,
// accelerator-seconds held), so that it can be corrected from real runs.
// Its figures are estimates for a GPU cluster, whatever the target.
type CostModel struct {
	// EngineStartup is one engine Pod from creation to Ready on a GPU
	// node: scheduling, the image pull (cached after the first) and the
	// model load, all with its accelerators held.
	EngineStartup Duration `json:"engineStartup"`
	// RouterRollout is one edit of spec.router.extraArgs: to the new
	// router Pod Ready (for a refused value, to the refusal confirmed).
	RouterRollout Duration `json:"routerRollout"`
	// Traffic is how long one case of a claim holds its deployment (its
	// traffic and waits), keyed by claim name, "default" for the others.
	Traffic map[string]Duration `json:"traffic"`
}

// TrafficOf is claim's traffic time: its own, else the default.
func (m CostModel) TrafficOf(claim string) time.Duration {
	if d, ok := m.Traffic[claim]; ok {
		return d.D()
	}
	return m.Traffic[SpecDefault].D()
}

// Words states the model in one line, for the plan and the report.
func (m CostModel) Words() string {
	var own []string
	for _, k := range slices.Sorted(maps.Keys(m.Traffic)) {
		if k != SpecDefault {
			own = append(own, fmt.Sprintf("%s %s", k, m.Traffic[k]))
		}
	}
	w := fmt.Sprintf("engine start-up %s per engine Pod, %s per router edit, %s of traffic per case", m.EngineStartup, m.RouterRollout, m.Traffic[SpecDefault])
	if len(own) > 0 {
		w += " (" + strings.Join(own, ", ") + ")"
	}
	return w
}

// defaultCostModel: a 0.5B model on a recent GPU with its image cached
// loads in 1 to 3 minutes (docs/operator.md#engine-probes allows 30); a
// router Pod is Ready at its first 10 s readiness probe; 120 serial chats
// of 16 tokens take well under a minute.
func defaultCostModel() CostModel {
	return CostModel{
		EngineStartup: Duration(3 * time.Minute),
		RouterRollout: Duration(30 * time.Second),
		Traffic:       map[string]Duration{SpecDefault: Duration(time.Minute)},
	}
}

func (c *Config) checkCostModel(p *problems) {
	m := c.CostModel
	if m.EngineStartup <= 0 {
		p.add(c, "costModel.engineStartup", "must be a positive duration such as \"3m\"")
	}
	if m.RouterRollout <= 0 {
		p.add(c, "costModel.routerRollout", "must be a positive duration such as \"30s\"")
	}
	if _, ok := m.Traffic[SpecDefault]; !ok {
		p.add(c, "costModel.traffic", "must set default (the traffic time of a claim not named here)")
	}
	for _, k := range slices.Sorted(maps.Keys(m.Traffic)) {
		path := "costModel.traffic." + k
		if !slices.Contains(c.Specs(), k) {
			p.add(c, path, fmt.Sprintf("names %q, which is not one of %s", k, strings.Join(c.Specs(), ", ")))
		}
		if m.Traffic[k] <= 0 {
			p.add(c, path, "must be a positive duration")
		}
	}
}
