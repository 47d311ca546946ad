package routing

// What the prefill/decode claims share: a deployment of the row's pd shape,
// its replicas by pool, and the traffic spec that measures each pool's
// split, the router's counters and the banner's routing mode.

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
)

// requirePD is the Require of the prefill/decode traffic claims.
func requirePD(claim string) func(fixtures.Expectation) []string {
	return func(e fixtures.Expectation) []string {
		pd := e.PD
		out := need(nil, pd != nil && pd.Requests > 0 && pd.PrefillSplit != nil && pd.DecodeSplit != nil,
			claim+" needs pd with requests, prefillSplit and decodeSplit")
		out = need(out, pd == nil || pd.Mode == "" || strings.HasPrefix(pd.Mode, "mode: "),
			fmt.Sprintf("pd.mode %q must be written \"mode: <the mode as the router prints it>\"", pdMode(pd)))
		return requireBanner(out, e.Banner)
	}
}

func pdMode(pd *fixtures.PD) string {
	if pd == nil {
		return ""
	}
	return pd.Mode
}

// readyPD is in.ready for a prefill/decode claim: the shared pair when the
// spec has one, else one of its own, of the row's shape and router args.
func (in Input) readyPD(ctx context.Context, claim string, exp fixtures.Expectation) clusters.Deployment {
	GinkgoHelper()
	Expect(exp.PD).NotTo(BeNil(), "fixtures/expect.yaml: claims[%s] row %s has no pd", claim, in.Pair)
	d := in.Deployment
	if d == nil {
		d = in.own(in.Pair, objectName(claim, in.Pair), exp.RouterArgs...)
		d.PD = exp.PD
	} else {
		Expect(d.RouterArgs).To(Equal(exp.RouterArgs), "invalid argument: input.Deployment %s was created with router args %q; %s is documented with %q",
			d.Name, d.RouterArgs, claim, exp.RouterArgs)
		Expect(sameShape(d.PD, exp.PD)).To(BeTrue(), "invalid argument: input.Deployment %s is not the prefill/decode pair %s is documented on", d.Name, claim)
	}
	return d.Ready(ctx, in.Target, claim)
}

// pools lists the engine replicas by pool, expecting the row's shape.
func pools(ctx context.Context, dep clusters.Deployment, pd fixtures.PD) (prefill, decode []clusters.Replica) {
	GinkgoHelper()
	rs, err := dep.Replicas(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, r := range rs {
		switch r.Kind {
		case api.RoleKindPrefill:
			prefill = append(prefill, r)
		case api.RoleKindDecode:
			decode = append(decode, r)
		}
	}
	Expect(prefill).To(HaveLen(int(pd.Prefill)), "prefill replicas of %s", dep.Name())
	Expect(decode).To(HaveLen(int(pd.Decode)), "decode replicas of %s", dep.Name())
	return prefill, decode
}

// poolOf is the replicas a series' worker label names: its pool's, or all.
func poolOf(pool string, prefill, decode []clusters.Replica) []clusters.Replica {
	switch pool {
	case fixtures.PoolPrefill:
		return prefill
	case fixtures.PoolDecode:
		return decode
	}
	return append(append([]clusters.Replica{}, prefill...), decode...)
}

// seriesPresent waits until a router series exists (naming exactly rs on
// its worker label, when it has one), records what it found and returns it
// in words with the reading, for the caller to assert after recording.
func (in Input) seriesPresent(ctx context.Context, claim string, dep clusters.Deployment, s fixtures.Series, rs []clusters.Replica) (string, reading) {
	GinkgoHelper()
	ms := labelMatchers(s.Labels)
	r := reading{what: fmt.Sprintf("the router's %s after traffic", metrics.Selector(s.Name, ms)), matcher: assertions.HaveSeries(s.Name, ms...)}
	if s.WorkerLabel != "" {
		r.matcher = assertions.HaveLabelValues(s.Name, s.WorkerLabel, workerValues(rs, s.WorkerValue), ms...)
	}
	r.after, r.err = settle(ctx, in.Target, claim, config.OpWaitMetrics, dep.RouterMetrics, r.matcher)
	found := seriesEntry(r.after, s, rs, in.Pair)
	found.Claim = claim
	report.Record(found)
	if s.WorkerLabel != "" {
		return fmt.Sprintf("%s{%s}: %s", s.Name, s.WorkerLabel, strings.Join(found.Values, ", ")), r
	}
	return fmt.Sprintf("%s: %d series", s.Name, found.Samples), r
}

// pdTrafficSpec is the body of the prefill/decode traffic claims: on the
// row's pair, the banner shows the documented policy and routing mode;
// pd.requests serial chats pass through both pools (each pool's engine
// counters account for every request) and split per pool as documented;
// the router's series rise (or exist) as documented, per pool.
func pdTrafficSpec(spec, claim, text string, input func() Input) {
	var (
		in  Input
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin(spec, claim)
	})

	It(text, func(ctx SpecContext) {
		pd := *exp.PD
		n := pd.Requests
		dep := in.readyPD(ctx, claim, exp)

		var b routerlog.Banner
		if exp.Banner != "" || pd.Mode != "" {
			b = in.waitBanner(ctx, claim, dep)
			report.Record(report.Banner{Claim: claim, Pair: in.Pair.String(), Expected: strings.TrimPrefix(pd.Mode+" | "+exp.Banner, " | "), Line: b.Summary()})
		}

		prefill, decode := pools(ctx, dep, pd)
		routerBefore := routerMetrics(ctx, dep)
		before := scrapeEngines(ctx, dep, poolOf("", prefill, decode))
		rep := in.send(ctx, claim, in.plan(ctx, dep, n))
		// Every request passes through both pools: each pool's engine
		// counters account for all n of them.
		preSplit := in.measureSplit(ctx, claim, dep, in.Pair, prefill, before, n)
		decSplit := in.measureSplit(ctx, claim, dep, in.Pair, decode, before, n)
		title := fmt.Sprintf("%d serial chats, router args %q", n, exp.RouterArgs)
		report.Record(splitEntry(claim, in.Pair, "prefill pool: "+title, preSplit, prefill, n, rep.Summary.Failed, shapeWords(*pd.PrefillSplit, n, len(prefill))))
		report.Record(splitEntry(claim, in.Pair, "decode pool: "+title, decSplit, decode, n, rep.Summary.Failed, shapeWords(*pd.DecodeSplit, n, len(decode))))

		measured := []string{"prefill " + preSplit.Ratio(), "decode " + decSplit.Ratio()}
		if exp.Banner != "" || pd.Mode != "" {
			measured = append([]string{"mode: " + b.Mode.String() + " | policy: " + b.Policy.String()}, measured...)
		}
		var readings []reading
		for _, s := range exp.Series {
			rs := poolOf(s.Pool, prefill, decode)
			var words string
			var r reading
			if s.Delta == "" {
				words, r = in.seriesPresent(ctx, claim, dep, s, rs)
			} else {
				words, r = in.seriesDelta(ctx, claim, dep, routerBefore, s, rs, n)
			}
			measured = append(measured, words)
			readings = append(readings, r)
		}
		report.Record(report.Claim{Claim: claim, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})

		if exp.Banner != "" {
			expectBanner(b, exp.Banner)
		}
		By("checking each pool's split")
		expectShape(preSplit, *pd.PrefillSplit, n)
		expectShape(decSplit, *pd.DecodeSplit, n)
		for _, r := range readings {
			r.expect()
		}
		// The banner's mode last: a front end that builds another mode
		// (docs/upstream-routers.md#front-end-differences) must not hide
		// what the pools did.
		if pd.Mode != "" {
			Expect(b).To(assertions.HaveStartedInMode(strings.TrimPrefix(pd.Mode, "mode: ")), "the router's startup banner")
		}
	})
}
