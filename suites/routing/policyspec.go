package routing

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
)

// policyClaim is the registry row of a claim about one --policy set at
// creation: its deployment is created with the row's routerArgs (no other
// claim uses it) and PolicySpec runs what the row describes.
func policyClaim(name, title string) Claim {
	return Claim{
		Name:        name,
		Title:       title,
		Labels:      []string{LabelNeedsGPU},
		PolicyLabel: true,
		Require: func(e fixtures.Expectation) []string {
			out := need(nil, len(e.RouterArgs) > 0 && e.Banner != "", name+" needs routerArgs and banner")
			out = need(out, e.Split != nil || e.Keyed != nil || e.Refusal != nil, name+" needs split, keyed or refusal")
			return requireBanner(out, e.Banner)
		},
		Deployment: documentedArgs,
		Spec: func(_ api.Pair, input func() Input) {
			PolicySpec(func() PolicySpecInput { return PolicySpecInput{Input: input(), Claim: name} })
		},
	}
}

// PolicySpecInput is the input of PolicySpec.
type PolicySpecInput struct {
	Input
	// Claim names the claims entry of fixtures/expect.yaml to run.
	Claim string
	// Requests overrides traffic.requests when > 0 (split rows).
	Requests int
}

// PolicySpec: a --policy set at creation. The banner shows its Debug form;
// then, as the claim's row says, serial chats split in the derived shape
// (a binomial bound for a uniform random pick), or chats keyed by a header
// keep one replica per key with many keys using every replica (and the
// policy's branch counters rise per kind of request), or every request is
// refused with the derived status, code and counter while no engine sees
// any. The router's own pick counters rise by the requests sent.
func PolicySpec(input func() PolicySpecInput) {
	var (
		in  PolicySpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("PolicySpec", in.Claim)
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
	})

	It("logs the policy and routes as its algorithm implies", func(ctx SpecContext) {
		dep := in.ready(ctx, in.Claim, exp.RouterArgs)
		b := in.waitBanner(ctx, in.Claim, dep)
		report.Record(report.Banner{Claim: in.Claim, Pair: in.Pair.String(), Expected: exp.Banner, Line: b.Summary()})
		expectBanner(b, exp.Banner)

		rs := in.replicas(ctx, dep)
		routerBefore := routerMetrics(ctx, dep)
		var sent int
		var measured []string
		var checks []func()
		switch {
		case exp.Refusal != nil:
			sent, measured, checks = in.refused(ctx, dep, rs, exp)
		case exp.Keyed != nil:
			sent, measured, checks = in.keyed(ctx, dep, rs, exp)
		default:
			sent, measured, checks = in.spread(ctx, dep, rs, exp)
		}
		var rises []reading
		for _, series := range exp.Series {
			words, r := in.seriesDelta(ctx, in.Claim, dep, routerBefore, series, rs, sent)
			measured = append(measured, words)
			rises = append(rises, r)
		}
		report.Record(report.Claim{Claim: in.Claim, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})
		for _, check := range checks {
			check()
		}
		for _, r := range rises {
			r.expect()
		}
	})
}

// spread sends serial chats and checks the split's shape.
func (in PolicySpecInput) spread(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, exp fixtures.Expectation) (int, []string, []func()) {
	GinkgoHelper()
	before := scrapeEngines(ctx, dep, rs)
	rep := in.send(ctx, in.Claim, in.plan(ctx, dep, in.Requests))
	s := in.measureSplit(ctx, in.Claim, dep, in.Pair, rs, before, in.Requests)
	want := splitWords(*exp.Split, in.Requests, len(rs))
	report.Record(splitEntry(in.Claim, in.Pair, fmt.Sprintf("%d serial chats, %s", in.Requests, strings.Join(exp.RouterArgs, " ")), s, rs, in.Requests, rep.Summary.Failed, want))
	return in.Requests, []string{s.Ratio()}, []func(){func() { expectSplit(s, *exp.Split, in.Requests) }}
}

// keyed sends Keys × PerKey chats keyed by the row's header, then the
// unkeyed ones, and checks one replica per key, every replica over the
// keys, the unkeyed split and the branch counters.
func (in PolicySpecInput) keyed(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, exp fixtures.Expectation) (int, []string, []func()) {
	GinkgoHelper()
	k := exp.Keyed
	routerBefore := routerMetrics(ctx, dep)
	base := in.plan(ctx, dep, k.PerKey)
	base.Prompts.Nonce = newHex()
	perKey := map[string]split.Split{}
	byReplica := map[string][]string{}
	var keys []string
	By(fmt.Sprintf("sending %d serial chats for each of %d %s values", k.PerKey, k.Keys, k.Header))
	for i := range k.Keys {
		key := fmt.Sprintf("k%02d-%s", i, base.Prompts.Nonce)
		plan := base
		plan.Headers = map[string]string{k.Header: key}
		plan.FirstIndex = i * k.PerKey
		before := scrapeEngines(ctx, dep, rs)
		in.send(ctx, in.Claim, plan)
		s := in.measureSplit(ctx, in.Claim, dep, in.Pair, rs, before, k.PerKey)
		perKey[key] = s
		keys = append(keys, key)
		for _, r := range s.Served() {
			byReplica[r] = append(byReplica[r], key)
		}
	}
	keyCounts := map[string]int{}
	for _, r := range rs {
		keyCounts[r.Name] = len(byReplica[r.Name])
	}
	keysSplit := split.New("keys per replica", replicaNames(rs), keyCounts)
	sent := k.Keys * k.PerKey
	measured := []string{fmt.Sprintf("%d keys × %d: keys per replica %s", k.Keys, k.PerKey, keysSplit.Ratio())}
	var unkeyed split.Split
	if k.Unkeyed > 0 {
		plan := base
		plan.Requests, plan.FirstIndex = k.Unkeyed, sent
		before := scrapeEngines(ctx, dep, rs)
		rep := in.send(ctx, in.Claim, plan)
		unkeyed = in.measureSplit(ctx, in.Claim, dep, in.Pair, rs, before, k.Unkeyed)
		shape := fixtures.Split{Shape: k.UnkeyedShape}
		report.Record(splitEntry(in.Claim, in.Pair, fmt.Sprintf("%d serial chats without %s", k.Unkeyed, k.Header), unkeyed, rs, k.Unkeyed,
			rep.Summary.Failed, splitWords(shape, k.Unkeyed, len(rs))))
		measured = append(measured, fmt.Sprintf("%d without %s: %s", k.Unkeyed, k.Header, unkeyed.Ratio()))
		sent += k.Unkeyed
	}
	checks := []func(){func() {
		for _, key := range keys {
			Expect(perKey[key]).To(assertions.BeAllOnOneReplica(), "the %d chats with %s: %s keep one replica: %s", k.PerKey, k.Header, key, exp.Derivation)
		}
		Expect(keysSplit).To(assertions.UseEveryReplica(), "%d keys spread over every replica: %s", k.Keys, exp.Derivation)
		if k.Unkeyed > 0 {
			expectSplit(unkeyed, fixtures.Split{Shape: k.UnkeyedShape}, k.Unkeyed)
		}
	}}
	if br := k.Branches; br != nil {
		words, check := in.branches(ctx, dep, routerBefore, *k)
		measured = append(measured, words...)
		checks = append(checks, check)
	}
	return sent, measured, checks
}

// branches reads the keyed policy's branch counters (and its gauge of
// remembered keys) after the keyed traffic.
func (in PolicySpecInput) branches(ctx context.Context, dep clusters.Deployment, before metrics.Snapshot, k fixtures.Keyed) ([]string, func()) {
	GinkgoHelper()
	br := k.Branches
	want := map[string]float64{br.First: float64(k.Keys), br.Repeat: float64(k.Keys * (k.PerKey - 1)), br.Unkeyed: float64(k.Unkeyed)}
	var ms []types.GomegaMatcher
	for _, branch := range slices.Sorted(maps.Keys(want)) {
		if branch != "" {
			ms = append(ms, assertions.HaveCounterRisenBy(before, br.Series, want[branch], metrics.Eq(br.Label, branch)))
		}
	}
	after, err := settle(ctx, in.Target, in.Claim, config.OpWaitMetrics, dep.RouterMetrics, SatisfyAll(ms...))
	var words []string
	if err == nil {
		for _, branch := range slices.Sorted(maps.Keys(want)) {
			d, _ := metrics.Delta(before, after, br.Series, metrics.Eq(br.Label, branch))
			words = append(words, fmt.Sprintf("%s{%s=%q} +%s", br.Series, br.Label, branch, metrics.FormatValue(d)))
		}
		if br.Entries != "" {
			v, _ := after.Sum(br.Entries)
			words = append(words, fmt.Sprintf("%s %s", br.Entries, metrics.FormatValue(v)))
		}
	}
	return words, func() {
		Expect(err).NotTo(HaveOccurred(), "scraping the router")
		for _, m := range ms {
			Expect(after).To(m, "the policy's branch counters")
		}
		if br.Entries != "" {
			v, err := after.Sum(br.Entries)
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(BeEquivalentTo(k.Keys), "%s: one entry per key", br.Entries)
		}
	}
}

// refused sends the row's requests and checks each is refused as derived,
// no engine counts any, and the row's series rises by requests × attempts.
func (in PolicySpecInput) refused(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, exp fixtures.Expectation) (int, []string, []func()) {
	GinkgoHelper()
	r := exp.Refusal
	routerBefore := routerMetrics(ctx, dep)
	before := scrapeEngines(ctx, dep, rs)
	plan := in.plan(ctx, dep, r.Requests)
	By(fmt.Sprintf("sending %d chats, each to be refused with %d %s", r.Requests, r.Status, r.Code))
	rep, err := in.runTraffic(ctx, in.Claim, plan)
	Expect(err).NotTo(HaveOccurred(), func() string { return fmt.Sprint(err) })
	after := scrapeEngines(ctx, dep, rs)
	counter, err := split.RequestCounter(in.Pair.Engine)
	Expect(err).NotTo(HaveOccurred())
	s, err := split.FromSnapshots(counter, replicaNames(rs), before, after)
	Expect(err).NotTo(HaveOccurred())
	report.Record(splitEntry(in.Claim, in.Pair, fmt.Sprintf("%d chats refused by the router", r.Requests), s, rs, r.Requests, rep.Summary.Failed, "0 on every replica"))
	var got []string
	for _, res := range rep.Results {
		got = append(got, fmt.Sprintf("%d %s (%s)", res.Status, res.ErrorCode, res.ResponseHeaders["x-smg-error-code"]))
	}
	series := r.Series
	series.Delta = fixtures.DeltaTotal
	words, rise := in.seriesDelta(ctx, in.Claim, dep, routerBefore, series, rs, r.Requests*r.Attempts)
	measured := []string{fmt.Sprintf("%d requests: %s; engines %s", r.Requests, strings.Join(slices.Compact(got), ", "), s.Ratio()), words}
	return 0, measured, []func(){func() {
		for _, res := range rep.Results {
			Expect(res.Status).To(Equal(r.Status), "request %d: %s %s", res.Index, res.Class, res.ErrorBody)
			Expect(res.ErrorCode).To(Equal(r.Code), "request %d: error.code of %s", res.Index, res.ErrorBody)
			Expect(res.ResponseHeaders).To(HaveKeyWithValue("x-smg-error-code", r.Code), "request %d: X-SMG-Error-Code", res.Index)
		}
		Expect(s).To(assertions.HaveTotal(0), "no engine served a refused request")
		rise.expect()
	}}
}

// expectSplit asserts a split against a derived or documented shape.
func expectSplit(s split.Split, shape fixtures.Split, sent int) {
	GinkgoHelper()
	switch shape.Shape {
	case fixtures.ShapeBinomial:
		lo, hi, ok := shape.Bounds(sent, len(s.Replicas))
		Expect(ok).To(BeTrue(), "a binomial bound needs at least 2 replicas")
		Expect(s).To(assertions.HaveTotal(sent))
		Expect(s).To(assertions.HaveEachCountWithin(lo, hi), "uniform random over %d replicas: each count inside the %v two-sided binomial interval", len(s.Replicas), shape.Confidence)
	case fixtures.ShapeSpread:
		Expect(s).To(assertions.HaveTotal(sent))
		Expect(s).To(assertions.UseEveryReplica())
	default:
		expectShape(s, shape, sent)
	}
}

// splitWords describes a derived shape for the report, binomial bounds
// included.
func splitWords(shape fixtures.Split, sent, replicas int) string {
	switch shape.Shape {
	case fixtures.ShapeBinomial:
		lo, hi, _ := shape.Bounds(sent, replicas)
		return fmt.Sprintf("each replica within [%d, %d] of %d (Bin(%d, 1/%d), %v two-sided)", lo, hi, sent, sent, replicas, shape.Confidence)
	case fixtures.ShapeSpread:
		return "every replica used"
	case fixtures.ShapeOneReplica:
		return fmt.Sprintf("all %d on one replica", sent)
	case fixtures.ShapeEven:
		return fmt.Sprintf("%d on each replica", sent/max(replicas, 1))
	}
	return "recorded, not asserted"
}
