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

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// PolicyRow is what the rows of a claim about one --policy on the
// router's argv state (random, poweroftwo, consistenthash, rendezvoushash,
// manual, prefixhash): the banner, then what its traffic shows, as one of
// a split of serial chats, chats keyed by a header, or refusals; and the
// router's pick counters. Its routerArgs are the --policy.
type PolicyRow struct {
	Banner  framework.Banner  `json:"banner"`
	Split   *fixtures.Split   `json:"split,omitempty"`
	Keyed   *Keyed            `json:"keyed,omitempty"`
	Refusal *Refusal          `json:"refusal,omitempty"`
	Series  []fixtures.Series `json:"series,omitempty"`
}

// Check implements yamlbind.Checker.
func (r PolicyRow) Check() []string {
	n := 0
	for _, set := range []bool{r.Split != nil, r.Keyed != nil, r.Refusal != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return []string{"a policy row states one of split, keyed or refusal"}
	}
	return nil
}

// Keyed is traffic keyed by a request header (consistent_hash,
// rendezvous_hash, manual): Keys distinct values, PerKey serial requests
// each, then Unkeyed requests without the header.
type Keyed struct {
	Header string `json:"header"`
	Keys   int    `json:"keys"`
	PerKey int    `json:"perKey"`
	// Unkeyed requests carry no header; UnkeyedShape is their split
	// (one-replica, binomial or recorded).
	Unkeyed      int    `json:"unkeyed,omitempty"`
	UnkeyedShape string `json:"unkeyedShape,omitempty"`
	// Branches are the policy's branch counters, when it has any.
	Branches *Branches `json:"branches,omitempty"`
}

// Check implements yamlbind.Checker.
func (k Keyed) Check() []string {
	var out []string
	if k.Header == "" || k.Keys < 2 || k.PerKey < 2 {
		out = append(out, "keyed needs header, keys > 1 and perKey > 1")
	}
	if k.Unkeyed > 0 && !slices.Contains(fixtures.Shapes, k.UnkeyedShape) {
		out = append(out, fmt.Sprintf("unkeyedShape %q is not a split shape", k.UnkeyedShape))
	}
	if b := k.Branches; b != nil && b.Unkeyed == "" && k.Unkeyed > 0 {
		out = append(out, "branches needs unkeyed when requests go without the header")
	}
	return out
}

// Branches names the branch counter of a keyed policy and the branch each
// kind of request takes: the first request of a key, a repeat of a key,
// a request without the header.
type Branches struct {
	Series  string `json:"series"`
	Label   string `json:"label"`
	First   string `json:"first"`
	Repeat  string `json:"repeat"`
	Unkeyed string `json:"unkeyed,omitempty"`
	// Entries is the gauge of remembered keys (it reads Keys after the run).
	Entries string `json:"entries,omitempty"`
}

// Refusal is a policy that answers every request with an error.
type Refusal struct {
	Requests int `json:"requests"`
	// Status and Code are the HTTP status and the error code, in the body's
	// error.code and the X-SMG-Error-Code header.
	Status int    `json:"status"`
	Code   string `json:"code"`
	// Attempts is how often the policy runs per request
	// (--retry-max-retries counts attempts, each runs the policy again).
	Attempts int `json:"attempts"`
	// Series rises by Requests × Attempts.
	Series fixtures.Series `json:"series"`
}

// Check implements yamlbind.Checker.
func (r Refusal) Check() []string {
	if r.Requests < 1 || r.Status < 400 || r.Attempts < 1 {
		return []string{"refusal needs requests and attempts above 0 and an error status"}
	}
	return nil
}

// PolicySpecInput is the input of PolicySpec.
type PolicySpecInput struct {
	framework.Input[PolicyRow]
	// Requests overrides traffic.requests when > 0 (split rows).
	Requests int
}

// Check implements framework.SpecInput.
func (in PolicySpecInput) Check() error { return checkRequests(in.Spec, in.Requests) }

// policyClaim is the registry row of a claim about one --policy on the
// router's argv: its case runs on the pair's shared deployment with the
// row's routerArgs (edited in when they differ), and PolicySpec runs what
// the row states.
func policyClaim(name, title, asserts string) framework.Claim[PolicyRow] {
	return framework.Claim[PolicyRow]{
		Name:        name,
		Title:       title,
		Asserts:     asserts,
		Labels:      []string{fixtures.LabelNeedsGPU},
		PolicyLabel: true,
		Specs: func(input func() framework.Input[PolicyRow]) {
			PolicySpec(func() PolicySpecInput { return PolicySpecInput{Input: input()} })
		},
	}
}

// PolicySpec: a --policy on the router's argv. The banner shows its Debug form;
// then, as the claim's row says, serial chats split in the derived shape
// (a binomial bound for a uniform random pick), or chats keyed by a header
// keep one replica per key with many keys using every replica (and the
// policy's branch counters rise per kind of request), or every request is
// refused with the derived status, code and counter while no engine sees
// any. The router's own pick counters rise by the requests sent.
func PolicySpec(input func() PolicySpecInput) {
	framework.CheckInput("PolicySpec", input)
	var in PolicySpecInput
	BeforeEach(func() {
		in = input()
		in.Begin()
		in.Requests = in.RequestsOr(in.Requests)
	})

	It("logs the policy and routes as its algorithm implies", func(ctx SpecContext) {
		exp := in.Expect
		dep := in.Ready(ctx)
		b := in.WaitBanner(ctx, dep)
		in.RecordBanner(string(exp.Banner), b)
		framework.ExpectBanner(b, exp.Banner)

		rs := in.Replicas(ctx, dep)
		routerBefore := framework.RouterMetrics(ctx, dep)
		var sent int
		var measured []string
		var checks []func()
		switch {
		case exp.Refusal != nil:
			sent, measured, checks = in.refused(ctx, dep, rs, *exp.Refusal)
		case exp.Keyed != nil:
			sent, measured, checks = in.keyed(ctx, dep, rs, *exp.Keyed)
		default:
			sent, measured, checks = in.spread(ctx, dep, rs, *exp.Split)
		}
		var rises []framework.Reading
		for _, series := range exp.Series {
			words, r := in.SeriesDelta(ctx, dep, routerBefore, series, rs, sent)
			measured = append(measured, words)
			rises = append(rises, r)
		}
		in.Record(in.Row.Summary, strings.Join(measured, "; "))
		for _, check := range checks {
			check()
		}
		for _, r := range rises {
			r.Expect()
		}
	})
}

// spread sends serial chats and checks the split's shape.
func (in PolicySpecInput) spread(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, shape fixtures.Split) (int, []string, []func()) {
	GinkgoHelper()
	before := framework.ScrapeEngines(ctx, dep, rs)
	rep := in.Send(ctx, in.ChatPlan(ctx, dep, in.Requests))
	s := in.MeasureSplit(ctx, dep, rs, before, in.Requests)
	want := framework.ShapeWords(shape, in.Requests, len(rs))
	in.RecordSplit(fmt.Sprintf("%d serial chats, %s", in.Requests, strings.Join(in.Row.RouterArgs, " ")), s, rs, in.Requests, rep.Summary.Failed, want)
	return in.Requests, []string{s.Ratio()}, []func(){func() { framework.ExpectShape(s, shape, in.Requests) }}
}

// keyed sends Keys × PerKey chats keyed by the row's header, then the
// unkeyed ones, and checks one replica per key, every replica over the
// keys, the unkeyed split and the branch counters.
func (in PolicySpecInput) keyed(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, k Keyed) (int, []string, []func()) {
	GinkgoHelper()
	routerBefore := framework.RouterMetrics(ctx, dep)
	base := in.ChatPlan(ctx, dep, k.PerKey)
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
		before := framework.ScrapeEngines(ctx, dep, rs)
		in.Send(ctx, plan)
		s := in.MeasureSplit(ctx, dep, rs, before, k.PerKey)
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
	keysSplit := split.New("keys per replica", framework.ReplicaNames(rs), keyCounts)
	sent := k.Keys * k.PerKey
	measured := []string{fmt.Sprintf("%d keys × %d: keys per replica %s", k.Keys, k.PerKey, keysSplit.Ratio())}
	var unkeyed split.Split
	if k.Unkeyed > 0 {
		plan := base
		plan.Requests, plan.FirstIndex = k.Unkeyed, sent
		before := framework.ScrapeEngines(ctx, dep, rs)
		rep := in.Send(ctx, plan)
		unkeyed = in.MeasureSplit(ctx, dep, rs, before, k.Unkeyed)
		shape := fixtures.Split{Shape: k.UnkeyedShape}
		in.RecordSplit(fmt.Sprintf("%d serial chats without %s", k.Unkeyed, k.Header), unkeyed, rs, k.Unkeyed,
			rep.Summary.Failed, framework.ShapeWords(shape, k.Unkeyed, len(rs)))
		measured = append(measured, fmt.Sprintf("%d without %s: %s", k.Unkeyed, k.Header, unkeyed.Ratio()))
		sent += k.Unkeyed
	}
	checks := []func(){func() {
		for _, key := range keys {
			Expect(perKey[key]).To(assertions.BeAllOnOneReplica(), "the %d chats with %s: %s keep one replica: %s", k.PerKey, k.Header, key, in.Row.Derivation)
		}
		Expect(keysSplit).To(assertions.UseEveryReplica(), "%d keys spread over every replica: %s", k.Keys, in.Row.Derivation)
		if k.Unkeyed > 0 {
			framework.ExpectShape(unkeyed, fixtures.Split{Shape: k.UnkeyedShape}, k.Unkeyed)
		}
	}}
	if br := k.Branches; br != nil {
		words, check := in.branches(ctx, dep, routerBefore, k)
		measured = append(measured, words...)
		checks = append(checks, check)
	}
	return sent, measured, checks
}

// branches reads the keyed policy's branch counters (and its gauge of
// remembered keys) after the keyed traffic.
func (in PolicySpecInput) branches(ctx context.Context, dep clusters.Deployment, before metrics.Snapshot, k Keyed) ([]string, func()) {
	GinkgoHelper()
	br := k.Branches
	want := map[string]float64{br.First: float64(k.Keys), br.Repeat: float64(k.Keys * (k.PerKey - 1)), br.Unkeyed: float64(k.Unkeyed)}
	var ms []types.GomegaMatcher
	for _, branch := range slices.Sorted(maps.Keys(want)) {
		if branch != "" {
			ms = append(ms, assertions.HaveCounterRisenBy(before, br.Series, want[branch], metrics.Eq(br.Label, branch)))
		}
	}
	after, err := framework.Settle(ctx, in.Spec, config.OpWaitMetrics, dep.RouterMetrics, SatisfyAll(ms...))
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
			Expect(after).To(assertions.HaveSum(br.Entries, float64(k.Keys)), "one entry per key")
		}
	}
}

// refused sends the row's requests and checks each is refused as derived,
// no engine counts any, and the row's series rises by requests × attempts.
func (in PolicySpecInput) refused(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, r Refusal) (int, []string, []func()) {
	GinkgoHelper()
	routerBefore := framework.RouterMetrics(ctx, dep)
	before := framework.ScrapeEngines(ctx, dep, rs)
	plan := in.ChatPlan(ctx, dep, r.Requests)
	By(fmt.Sprintf("sending %d chats, each to be refused with %d %s", r.Requests, r.Status, r.Code))
	rep, err := in.RunTraffic(ctx, plan)
	Expect(err).NotTo(HaveOccurred(), func() string { return fmt.Sprint(err) })
	after := framework.ScrapeEngines(ctx, dep, rs)
	counter, err := split.RequestCounter(in.Pair.Engine)
	Expect(err).NotTo(HaveOccurred())
	s, err := split.FromSnapshots(counter, framework.ReplicaNames(rs), before, after)
	Expect(err).NotTo(HaveOccurred())
	in.RecordSplit(fmt.Sprintf("%d chats refused by the router", r.Requests), s, rs, r.Requests, rep.Summary.Failed, "0 on every replica")
	var got []string
	var answers []assertions.Answer
	for _, res := range rep.Results {
		got = append(got, fmt.Sprintf("%d %s (%s)", res.Status, res.ErrorCode, res.ResponseHeaders["x-smg-error-code"]))
		answers = append(answers, assertions.Answer{Request: fmt.Sprintf("chat #%d", res.Index), Status: res.Status,
			Fields: map[string]string{"error.code": res.ErrorCode, "X-SMG-Error-Code": res.ResponseHeaders["x-smg-error-code"]}})
	}
	series := r.Series
	series.Delta = fixtures.DeltaTotal
	words, rise := in.SeriesDelta(ctx, dep, routerBefore, series, rs, r.Requests*r.Attempts)
	measured := []string{fmt.Sprintf("%d requests: %s; engines %s", r.Requests, strings.Join(slices.Compact(got), ", "), s.Ratio()), words}
	return 0, measured, []func(){func() {
		Expect(answers).To(assertions.HaveAllAnswered(r.Status, map[string]string{"error.code": r.Code, "X-SMG-Error-Code": r.Code}), "every chat refused by the policy")
		Expect(s).To(assertions.HaveTotal(0), "no engine served a refused request")
		rise.Expect()
	}}
}
