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
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
)

// ClaimSwitch: a live edit of spec.router.extraArgs and back while traffic
// runs.
const ClaimSwitch = "switch"

var _ = register(Claim{
	Name:    ClaimSwitch,
	Title:   "Live switch of spec.router.extraArgs",
	Labels:  []string{LabelNeedsGPU},
	Mutates: true,
	Require: func(e fixtures.Expectation) []string {
		out := need(nil, e.Switch != nil, "switch needs switch")
		if e.Switch != nil {
			out = need(out, e.Switch.Split != nil && e.Switch.SplitBack != nil, "switch needs switch.split and switch.splitBack")
			out = requireBanner(out, e.Switch.Banner)
			out = requireBanner(out, e.Switch.BannerBack)
		}
		return out
	},
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		SwitchSpec(func() SwitchSpecInput { return SwitchSpecInput{Input: input()} })
	},
})

// SwitchSpecInput is the input of SwitchSpec.
type SwitchSpecInput struct {
	Input
	// Requests overrides traffic.requests for the measured batches when > 0.
	Requests int
}

// SwitchSpec edits spec.router.extraArgs of a running deployment to the
// row's switch.to and back to the creation-time args, each time while
// background traffic runs. Each edit: a new router Pod (new UID) replaces
// the old one, prints the new banner and starts with empty state (its
// counters cover only traffic sent since the edit); the background
// traffic's failures stay within the bound; the engine Pods are untouched.
// A serial batch after each edit splits as the new args say.
func SwitchSpec(input func() SwitchSpecInput) {
	var (
		in  SwitchSpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("SwitchSpec", ClaimSwitch)
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
	})

	It("replaces the router Pod on each edit, keeps the engines and routes as the new args say", func(ctx SpecContext) {
		sw := exp.Switch
		dep := in.ready(ctx, ClaimSwitch, exp.RouterArgs)
		in.restoreAfter(ctx, ClaimSwitch, dep)
		obj, err := dep.Object(ctx)
		Expect(err).NotTo(HaveOccurred())
		created := slices.Clone(obj.Spec.Router.ExtraArgs)
		engines := replicaUIDs(in.replicas(ctx, dep))
		base, err := dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())

		var measured []string
		var checks []func()
		for _, step := range []struct {
			args   []string
			banner string
			split  *fixtures.Split
			series []fixtures.Series
		}{
			{sw.To, sw.Banner, sw.Split, sw.Series},
			{created, sw.BannerBack, sw.SplitBack, nil},
		} {
			words, check := in.switchTo(ctx, dep, base, step.args, step.banner, step.split, step.series, sw.Failed)
			measured = append(measured, words)
			checks = append(checks, check)
		}
		after := replicaUIDs(in.replicas(ctx, dep))
		measured = append(measured, fmt.Sprintf("engine Pods unchanged: %v", maps.Equal(engines, after)))
		report.Record(report.Claim{Claim: ClaimSwitch, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})
		for _, c := range checks {
			c()
		}
		Expect(after).To(Equal(engines), "engine Pods (name: UID) before the edits and after; a router edit must not replace engines")
	})
}

// switchTo edits the router's extraArgs to args under background traffic,
// waits for the replacement router Pod, and measures a serial batch. It
// records the evidence and returns it in words with the assertions, for the
// caller to run after recording the rest.
func (in SwitchSpecInput) switchTo(ctx context.Context, dep clusters.Deployment, base string, args []string, banner string,
	shape *fixtures.Split, series []fixtures.Series, bound fixtures.Bound) (string, func()) {
	GinkgoHelper()
	what := fmt.Sprintf("extraArgs %q", args)
	old := routerUIDs(ctx, dep)
	l := in.startLoad(ctx, ClaimSwitch, base, loadConcurrency)
	in.waitOK(ctx, ClaimSwitch, l, 2*loadConcurrency, time.Now())
	By("editing spec.router.extraArgs to " + what + " while traffic runs")
	edited := time.Now()
	Expect(dep.Update(ctx, func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = slices.Clone(args) })).To(Succeed())
	pods := in.waitRouterPods(ctx, ClaimSwitch, dep, 1, old)
	rolled := time.Since(edited)
	in.waitOK(ctx, ClaimSwitch, l, 2*loadConcurrency, time.Now())
	s := l.stop()
	d := in.disrupted(ClaimSwitch, fmt.Sprintf("edit to %s: router Pod %s -> %s", what, strings.Join(old, ","), pods[0].UID), s, loadConcurrency, bound, rolled)
	sinceEdit := s.Requests

	var bn routerlog.Banner
	if banner != "" {
		bn = in.waitBanner(ctx, ClaimSwitch, dep)
		report.Record(report.Banner{Claim: ClaimSwitch, Pair: in.Pair.String(), Expected: banner, Line: bn.Summary()})
	}

	rs := in.replicas(ctx, dep)
	routerBefore := routerMetrics(ctx, dep)
	carried := in.counted(routerBefore, series, pods[0].Name)
	before := scrapeEngines(ctx, dep, rs)
	rep := in.send(ctx, ClaimSwitch, in.plan(ctx, dep, in.Requests))
	split := in.measureSplit(ctx, ClaimSwitch, dep, in.Pair, rs, before, in.Requests)
	want := shapeWords(*shape, in.Requests, len(rs))
	report.Record(splitEntry(ClaimSwitch, in.Pair, fmt.Sprintf("%d serial chats after the edit to %s", in.Requests, what), split, rs, in.Requests, rep.Summary.Failed, want))
	var rises []reading
	for _, sr := range series {
		_, r := in.seriesDelta(ctx, ClaimSwitch, dep, routerBefore, sr, rs, in.Requests)
		rises = append(rises, r)
	}
	words := fmt.Sprintf("%s: new router Pod after %.2fs, %d of %d background requests failed (bound %d), banner %q, split %s",
		what, rolled.Seconds(), s.Failed, s.Requests, d.FailedBound, bn.Summary(), split.Ratio())
	return words, func() {
		GinkgoHelper()
		expectWithinBound(d, bound.Why)
		if banner != "" {
			expectBanner(bn, banner)
		}
		Expect(carried).To(BeNumerically("<=", sinceEdit),
			"the new router Pod %s counted %v requests before the batch, more than the %d sent since the edit: it did not start empty", pods[0].Name, carried, sinceEdit)
		expectShape(split, *shape, in.Requests)
		for _, r := range rises {
			r.expect()
		}
	}
}

// counted sums series (the documented router counters) on one router Pod:
// what it counted before the measured batch.
func (in Input) counted(snap metrics.Snapshot, series []fixtures.Series, pod string) float64 {
	var total float64
	for _, s := range series {
		for _, smp := range snap.Samples {
			if smp.Name == s.Name && smp.Labels[metrics.SourceLabel] == pod {
				total += smp.Value
			}
		}
	}
	return total
}
