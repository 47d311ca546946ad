package routing

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimSwitch: editing spec.router.extraArgs of a running deployment
// replaces the router Pod (new banner, empty state) and leaves the
// engines alone; traffic keeps flowing within a derived bound, and the new
// args route as they would have at creation.
const ClaimSwitch = "switch"

// SwitchRow is what switch's rows state.
type SwitchRow struct {
	Switch Switch `json:"switch"`
}

// Switch is a live edit of spec.router.extraArgs from the args the claim
// finds (its row's routerArgs) to To and back, while traffic runs.
type Switch struct {
	// To are the extraArgs the first edit sets; the second restores the
	// ones before it.
	To []string `json:"to"`
	// Banner is the new router Pod's banner after the first edit, and
	// BannerBack after the second (unset when the router prints none).
	Banner     framework.Banner `json:"banner,omitempty"`
	BannerBack framework.Banner `json:"bannerBack,omitempty"`
	// Split is the measured serial batch's split after the first edit, and
	// SplitBack after the second.
	Split     fixtures.Split `json:"split"`
	SplitBack fixtures.Split `json:"splitBack"`
	// Series rise as documented over the batch after the first edit, on the
	// new router Pod (its counters start at 0: nothing carried over).
	Series []fixtures.Series `json:"series,omitempty"`
	// Failed bounds the failed requests of the traffic over each edit.
	Failed fixtures.Bound `json:"failed"`
}

// Check implements yamlbind.Checker.
func (s Switch) Check() []string {
	if len(s.To) == 0 {
		return []string{"to must list the extraArgs the edit sets"}
	}
	return nil
}

var _ = framework.Add(Registry, framework.Claim[SwitchRow]{
	Name:  ClaimSwitch,
	Title: "Live switch of spec.router.extraArgs",
	Asserts: "`spec.router.extraArgs` edited to `--policy round_robin` and back while traffic runs: each edit a new router " +
		"Pod (new UID) with the new banner and empty state, engine Pods unchanged (same UIDs), 60/60 after the first edit " +
		"and all on one replica after the second, failed requests within the stated bound (llm-d: `--v 3`, no policy); and no " +
		"edit of the pair's router args by the suite itself in the run replaced an engine Pod (the edit guard)",
	Labels:  []string{fixtures.LabelNeedsGPU},
	Mutates: true,
	Specs: func(input func() framework.Input[SwitchRow]) {
		SwitchSpec(func() SwitchSpecInput { return SwitchSpecInput{Input: input()} })
	},
})

// SwitchSpecInput is the input of SwitchSpec.
type SwitchSpecInput struct {
	framework.Input[SwitchRow]
	// Requests overrides traffic.requests for the measured batches when > 0.
	Requests int
}

// Check implements framework.SpecInput.
func (in SwitchSpecInput) Check() error { return checkRequests(in.Spec, in.Requests) }

// SwitchSpec edits spec.router.extraArgs of a running deployment to the
// row's switch.to and back to the args it found, each time while
// background traffic runs. Each edit: a new router Pod (new UID) replaces
// the old one, prints the new banner and starts with empty state (its
// counters cover only traffic sent since the edit); the background
// traffic's failures stay within the bound; the engine Pods are untouched.
// A serial batch after each edit splits as the new args say.
func SwitchSpec(input func() SwitchSpecInput) {
	framework.CheckInput("SwitchSpec", input)
	var in SwitchSpecInput
	BeforeEach(func() {
		in = input()
		in.Begin()
		in.Requests = in.RequestsOr(in.Requests)
	})

	It("replaces the router Pod on each edit, keeps the engines and routes as the new args say", func(ctx SpecContext) {
		sw := in.Expect.Switch
		dep := in.Ready(ctx)
		in.RestoreAfter(ctx, dep)
		obj, err := dep.Object(ctx)
		Expect(err).NotTo(HaveOccurred())
		created := slices.Clone(obj.Spec.Router.ExtraArgs)
		engines := clusters.ReplicaUIDs(in.Replicas(ctx, dep))
		base, err := dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())

		var measured []string
		var checks []func()
		for _, step := range []struct {
			args   []string
			banner framework.Banner
			split  fixtures.Split
			series []fixtures.Series
		}{
			{sw.To, sw.Banner, sw.Split, sw.Series},
			{created, sw.BannerBack, sw.SplitBack, nil},
		} {
			words, check := in.switchTo(ctx, dep, base, step.args, step.banner, step.split, step.series, sw.Failed)
			measured = append(measured, words)
			checks = append(checks, check)
		}
		after := clusters.ReplicaUIDs(in.Replicas(ctx, dep))
		measured = append(measured, fmt.Sprintf("engine Pods unchanged: %v", maps.Equal(engines, after)))
		in.Record(in.Row.Summary, strings.Join(measured, "; "))
		// The suite's own edits of this pair's router args in the run are
		// the same claim: one that replaced an engine Pod fails it, with
		// the edit guard's line, whatever this spec's edits did.
		in.ExpectEditsKeptEngines()
		for _, c := range checks {
			c()
		}
		Expect(after).To(assertions.HavePodsReplaced(engines), "engine Pods before the edits and after: a router edit must not replace engines")
	})
}

// switchTo edits the router's extraArgs to args under background traffic,
// waits for the replacement router Pod, and measures a serial batch. It
// records the evidence and returns it in words with the assertions, for the
// caller to run after recording the rest.
func (in SwitchSpecInput) switchTo(ctx context.Context, dep clusters.Deployment, base string, args []string, banner framework.Banner,
	shape fixtures.Split, series []fixtures.Series, bound fixtures.Bound) (string, func()) {
	GinkgoHelper()
	what := fmt.Sprintf("extraArgs %q", args)
	old := framework.RouterUIDs(ctx, dep)
	l := in.StartLoad(ctx, base, framework.LoadConcurrency)
	in.WaitOK(ctx, l, 2*framework.LoadConcurrency, time.Now())
	By("editing spec.router.extraArgs to " + what + " while traffic runs")
	edited := time.Now()
	Expect(dep.Update(ctx, func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = slices.Clone(args) })).To(Succeed())
	pods := in.WaitRouterPods(ctx, dep, 1, old)
	rolled := time.Since(edited)
	in.WaitOK(ctx, l, 2*framework.LoadConcurrency, time.Now())
	s := l.Stop()
	d := in.Disrupted(fmt.Sprintf("edit to %s: router Pod %s -> %s", what, strings.Join(old, ","), pods[0].UID), s, framework.LoadConcurrency, bound, rolled)
	sinceEdit := s.Requests

	var bn routerlog.Banner
	if banner != "" {
		bn = in.WaitBanner(ctx, dep)
		in.RecordBanner(string(banner), bn)
	}

	rs := in.Replicas(ctx, dep)
	routerBefore := framework.RouterMetrics(ctx, dep)
	before := framework.ScrapeEngines(ctx, dep, rs)
	rep := in.Send(ctx, in.ChatPlan(ctx, dep, in.Requests))
	split := in.MeasureSplit(ctx, dep, rs, before, in.Requests)
	want := framework.ShapeWords(shape, in.Requests, len(rs))
	in.RecordSplit(fmt.Sprintf("%d serial chats after the edit to %s", in.Requests, what), split, rs, in.Requests, rep.Summary.Failed, want)
	var rises []framework.Reading
	for _, sr := range series {
		_, r := in.SeriesDelta(ctx, dep, routerBefore, sr, rs, in.Requests)
		rises = append(rises, r)
	}
	words := fmt.Sprintf("%s: new router Pod after %.2fs, %d of %d background requests failed (bound %d), banner %q, split %s",
		what, rolled.Seconds(), s.Failed, s.Requests, d.FailedBound, bn.Summary(), split.Ratio())
	return words, func() {
		GinkgoHelper()
		framework.ExpectWithinBound(d, bound.Why)
		if banner != "" {
			framework.ExpectBanner(bn, banner)
		}
		// The new router Pod started empty: before the batch it had counted
		// no more than the background requests sent since the edit.
		for _, sr := range series {
			Expect(routerBefore).To(assertions.HaveSumAtMost(sr.Name, float64(sinceEdit), metrics.Eq(metrics.SourceLabel, pods[0].Name)),
				"router Pod %s before the batch: %d requests were sent since the edit", pods[0].Name, sinceEdit)
		}
		framework.ExpectShape(split, shape, in.Requests)
		for _, r := range rises {
			r.Expect()
		}
	}
}
