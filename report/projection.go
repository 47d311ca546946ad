package report

// The run's projected GPU cost (make plan's, from the cost model of
// e2e.yaml) beside what it measured, so that the model can be corrected
// from real runs.

import (
	"fmt"
	"strings"
)

// CostProjection is what a plan projects a run to cost on a GPU cluster
// under the cost model of e2e.yaml (framework.Plan.Project).
type CostProjection struct {
	// Model is the cost model in one line.
	Model            string `json:"model"`
	ModelDeployments int    `json:"modelDeployments"`
	EnginePods       int    `json:"enginePods"`
	RouterEdits      int    `json:"routerEdits"`
	// Processes is the Ginkgo processes it is projected for.
	Processes int `json:"processes"`
	// PeakAcceleratorsPerProcess is the largest deployment's accelerators
	// (a process holds one deployment at a time); PeakAccelerators the
	// largest Processes of them at once.
	PeakAcceleratorsPerProcess int64 `json:"peakAcceleratorsPerProcess"`
	PeakAccelerators           int64 `json:"peakAccelerators"`
	// GPUMinutesLoading are held while engine Pods start (creation to
	// Ready), GPUMinutesReady from Ready to deletion: the latter is what
	// a kube run measures as accelerator-seconds.
	GPUMinutesLoading float64 `json:"gpuMinutesLoading"`
	GPUMinutesReady   float64 `json:"gpuMinutesReady"`
	// WallMinutes is the deployments' projected minutes spread over the
	// processes, and never less than the longest deployment.
	WallMinutes float64 `json:"wallMinutes"`
	// Deployments are the ModelDeployments in the order each pair's specs
	// meet them.
	Deployments []ProjectedDeployment `json:"deployments"`
}

// ProjectedDeployment is one ModelDeployment of a plan.
type ProjectedDeployment struct {
	Pair string `json:"pair"`
	Name string `json:"name"`
	// Shape says its engines, e.g. "2 servers" or "2 prefill + 2 decode".
	Shape       string   `json:"shape"`
	CreatedWith []string `json:"createdWith"`
	EnginePods  int      `json:"enginePods"`
	// Accelerators are what its engine Pods hold at once (a replacement
	// Pod's included).
	Accelerators int64 `json:"accelerators"`
	Cases        int   `json:"cases"`
	RouterEdits  int   `json:"routerEdits"`
	// Minutes is from its creation to its deletion; GPUMinutes that
	// times its accelerators.
	Minutes    float64 `json:"minutes"`
	GPUMinutes float64 `json:"gpuMinutes"`
}

// Summary is the projection in one line.
func (p CostProjection) Summary() string {
	return fmt.Sprintf("%d ModelDeployments, %d engine Pods, %d router edits; peak %d accelerators per process, %d with %d processes; "+
		"%.0f GPU-minutes (%.0f loading, %.0f Ready); about %.0f minutes",
		p.ModelDeployments, p.EnginePods, p.RouterEdits, p.PeakAcceleratorsPerProcess, p.PeakAccelerators, p.Processes,
		p.GPUMinutesLoading+p.GPUMinutesReady, p.GPUMinutesLoading, p.GPUMinutesReady, p.WallMinutes)
}

// projectionRows set the projection beside what the run measured.
func projectionRows(c CostSummary) []EnvRow {
	p := c.Projected
	if p == nil {
		return nil
	}
	measured := []string{fmt.Sprintf("%d ModelDeployments", c.ModelDeployments)}
	if c.EnginePodsStarted != nil {
		measured = append(measured, fmt.Sprintf("%d engine Pods", *c.EnginePodsStarted))
	}
	switch {
	case c.AcceleratorSeconds != nil:
		measured = append(measured, fmt.Sprintf("%.0f GPU-minutes Ready (projected %.0f)", *c.AcceleratorSeconds/60, p.GPUMinutesReady))
	case c.AcceleratorSecondsNotApplicable != "":
		measured = append(measured, "no GPU-minutes (the target holds no accelerator)")
	}
	return []EnvRow{
		{"Projected cost", p.Summary() + " — from the cost model: " + p.Model},
		{"Projected vs measured", fmt.Sprintf("projected %d ModelDeployments and %d engine Pods; measured %s", p.ModelDeployments, p.EnginePods,
			strings.Join(measured, ", "))},
	}
}
