package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/suiterun"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/suites/framework"
	"github.com/gpustack/routing-conformance/suites/routing"
)

// plan prints what a run with the same knobs would create, and what it
// would cost on a GPU cluster under the cost model of e2e.yaml, without
// creating anything: the ModelDeployments in the order each pair's specs
// meet them, with their engines, accelerators, cases and router edits; the
// peak accelerators per Ginkgo process and in all; the projected
// GPU-minutes. On kube and kind it reads the chosen InstanceType's free
// accelerators and says whether the peak fits (freeAccelerators, nil on
// the sim). The exit status is 0 when the plan was printed, 1 when the
// peak does not fit, 2 on a bad knob or config.
func plan(ctx context.Context, o suiterun.Options, free func(context.Context, *config.Config) (int64, string, error)) int {
	out := o.Out
	if err := suiterun.CheckLabelFilter(o.LabelFilter); err != nil {
		fmt.Fprintln(out, "plan:", err)
		return 2
	}
	if err := os.Setenv(config.EnvTarget, o.Target); err != nil {
		fmt.Fprintln(out, "plan:", err)
		return 2
	}
	cfg, err := config.Load(o.Config, routing.Registry.Names()...)
	if err != nil {
		fmt.Fprintln(out, "plan: config error:", err)
		return 2
	}
	if err := routing.Registry.Check(); err != nil {
		fmt.Fprintln(out, "plan: the claim registry and fixtures/expect.yaml disagree:", err)
		return 2
	}
	p, err := routing.Registry.PlanFor(cfg, o.LabelFilter)
	if err != nil {
		fmt.Fprintln(out, "plan:", err)
		return 2
	}
	proj, err := p.Project(cfg, o.Nodes)
	if err != nil {
		fmt.Fprintln(out, "plan:", err)
		return 2
	}
	printPlan(out, o, cfg, p, proj)
	switch {
	case free == nil && cfg.Target == config.TargetSim:
		fmt.Fprintln(out, "Target sim: it holds no accelerators; the figures are for a GPU cluster with this config.")
		return 0
	case free == nil:
		fmt.Fprintf(out, "Target %s: the cluster does not exist before the run; free accelerators are read on kube.\n", cfg.Target)
		return 0
	}
	n, where, err := free(ctx, cfg)
	if err != nil {
		fmt.Fprintf(out, "Target %s: free accelerators not read: %v\n", cfg.Target, err)
		return 1
	}
	if proj.PeakAccelerators > n {
		fmt.Fprintf(out, "Does not fit: needs %d accelerators at peak with GINKGO_NODES=%d; %d free on %s. Specs that find no room skip; "+
			"GINKGO_NODES=%d needs %d.\n", proj.PeakAccelerators, o.Nodes, n, where, 1, proj.PeakAcceleratorsPerProcess)
		return 1
	}
	fmt.Fprintf(out, "Fits: needs %d accelerators at peak with GINKGO_NODES=%d; %d free on %s.\n", proj.PeakAccelerators, o.Nodes, n, where)
	return 0
}

// printPlan writes the plan's deployments and totals.
func printPlan(out io.Writer, o suiterun.Options, cfg *config.Config, p framework.Plan, proj report.CostProjection) {
	filter := o.LabelFilter
	if filter == "" {
		filter = "none"
	}
	sharing := "one deployment per pair and shape, router args by edit"
	if p.Isolated {
		sharing = config.EnvIsolate + ": one deployment per case"
	}
	fmt.Fprintf(out, "Plan of a run on target %s with %s (label filter: %s; GINKGO_NODES=%d; %s). Nothing is created.\n",
		cfg.Target, cfg.File(), filter, proj.Processes, sharing)
	if o.Focus != "" || o.Skip != "" {
		fmt.Fprintln(out, "GINKGO_FOCUS and GINKGO_SKIP select by spec text, which the plan does not model: it shows the label filter's selection.")
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pair\tModelDeployment\tengines\tengine Pods\taccelerators\tcases\trouter edits\tcreated with\tminutes\tGPU-minutes")
	for _, d := range proj.Deployments {
		args := "the router's defaults"
		if len(d.CreatedWith) > 0 {
			args = strings.Join(d.CreatedWith, " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%.0f\t%.0f\n", d.Pair, d.Name, d.Shape, d.EnginePods, d.Accelerators, d.Cases,
			d.RouterEdits, args, d.Minutes, d.GPUMinutes)
	}
	tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%d ModelDeployments, %d engine Pods, %d edits of spec.router.extraArgs (a router Pod each, no engine Pod).\n",
		proj.ModelDeployments, proj.EnginePods, proj.RouterEdits)
	fmt.Fprintf(out, "Peak accelerators: %d per Ginkgo process (the largest deployment), %d in all with GINKGO_NODES=%d.\n",
		proj.PeakAcceleratorsPerProcess, proj.PeakAccelerators, proj.Processes)
	fmt.Fprintf(out, "Projected cost: %.0f GPU-minutes (%.0f while engine Pods load, %.0f Ready), about %.0f minutes with GINKGO_NODES=%d.\n",
		proj.GPUMinutesLoading+proj.GPUMinutesReady, proj.GPUMinutesLoading, proj.GPUMinutesReady, proj.WallMinutes, proj.Processes)
	fmt.Fprintf(out, "Cost model (e2e.yaml costModel; correct it from a run's report.json environment.cost): %s.\n", proj.Model)
}

// freeAccelerators reads the chosen InstanceType's free accelerators on a
// cluster (kube; kind only once its cluster exists).
func freeAccelerators(ctx context.Context, cfg *config.Config) (int64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	it, err := framework.FreeAccelerators(ctx, cfg)
	if err != nil {
		return 0, "", err
	}
	where := "InstanceType " + it.Name
	if it.Product != "" {
		where += " (" + it.Product + ")"
	}
	return it.Remaining, where, nil
}
