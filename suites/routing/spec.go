package routing

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/internal/progress"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
)

// Target is what every spec needs from the suite: the config, the target
// cluster and what the target said about itself.
type Target struct {
	Config  *config.Config
	Cluster clusters.Cluster
	Env     clusters.Environment
}

// Input is what every spec function gets; each claim's XSpecInput embeds
// it and adds the claim's own knobs.
type Input struct {
	Target
	Pair api.Pair
	// Deployment is the deployment of Pair that the spec shares with the
	// other claims of its Ordered container (created by the first spec that
	// needs it, deleted after the last). Nil: the spec creates one of its
	// own and deletes it when it ends (E2E_ISOLATE=1, or a spec function
	// called outside the registry).
	Deployment *PairDeployment
}

// check fails the spec when the suite handed a spec an incomplete input.
func (in Input) check(spec string) {
	GinkgoHelper()
	Expect(in.Config).NotTo(BeNil(), "invalid argument: input.Config can't be nil when calling %s", spec)
	Expect(in.Cluster).NotTo(BeNil(), "invalid argument: input.Cluster can't be nil when calling %s", spec)
	Expect(in.Pair.Router).NotTo(BeEmpty(), "invalid argument: input.Pair.Router can't be empty when calling %s", spec)
	Expect(in.Pair.Engine).NotTo(BeEmpty(), "invalid argument: input.Pair.Engine can't be empty when calling %s", spec)
}

// expectation returns the documented outcome of claim for p, skipping the
// spec when the docs say the claim does not apply to the pair.
func expectation(claim string, p api.Pair) fixtures.Expectation {
	GinkgoHelper()
	exp, err := fixtures.Lookup(claim, p)
	Expect(err).NotTo(HaveOccurred())
	if exp.NotApplicable != "" {
		Skip("not applicable: " + exp.NotApplicable)
	}
	return exp
}

// begin is the preamble of a spec that runs engines: the input is complete,
// the claim applies to the pair and the target can run it (else the spec
// skips, with the reason). It returns the claim's expectation for the pair.
func (in Input) begin(spec, claim string) fixtures.Expectation {
	GinkgoHelper()
	in.check(spec)
	exp := expectation(claim, in.Pair)
	in.requireRunnable(in.Pair)
	in.requireJudgeable(claim, in.Pair)
	return exp
}

// requireJudgeable skips a claim the target says it cannot give a valid
// outcome on p (clusters.ClaimLimiter), with the target's reason.
func (t Target) requireJudgeable(claim string, p api.Pair) {
	GinkgoHelper()
	if l, ok := t.Cluster.(clusters.ClaimLimiter); ok {
		if why := l.ClaimLimit(claim, p); why != "" {
			Skip(fmt.Sprintf("target %s cannot judge %s on %s: %s", t.Env.Target, claim, p, why))
		}
	}
}

// requireConfigured skips a pair the config does not qualify.
func (t Target) requireConfigured(p api.Pair) {
	GinkgoHelper()
	if !slices.Contains(t.Config.Pairs(), p) {
		Skip(fmt.Sprintf("%s is not qualified in this run: %s lists routers %v and engines %v", p, t.Config.File(), routerNames(t.Config), engineNames(t.Config)))
	}
}

// requireRunnable skips a pair the config does not qualify or the target
// cannot run, with the target's reason.
func (t Target) requireRunnable(p api.Pair) {
	GinkgoHelper()
	t.requireConfigured(p)
	if ok, reason := t.Env.Supports(p.Router, p.Engine); !ok {
		Skip(fmt.Sprintf("target %s cannot run %s: %s", t.Env.Target, p, reason))
	}
}

func routerNames(c *config.Config) []string {
	var out []string
	for _, r := range c.Routers {
		out = append(out, r.Name)
	}
	return out
}

func engineNames(c *config.Config) []string {
	var out []string
	for _, e := range c.Engines {
		out = append(out, e.Name)
	}
	return out
}

// intervalOf is the [timeout, poll] of op for claim; an unknown key fails.
func intervalOf(cfg *config.Config, claim, op string) config.Interval {
	GinkgoHelper()
	iv, err := cfg.Interval(claim, op)
	Expect(err).NotTo(HaveOccurred())
	return iv
}

// eventually is Eventually with the interval of claim/op from e2e.yaml.
// Each poll's context ends with the interval (withinDeadline), so a call
// that hangs fails the wait within its interval.
func (t Target) eventually(ctx context.Context, claim, op string, f any) AsyncAssertion {
	GinkgoHelper()
	iv := intervalOf(t.Config, claim, op)
	return Eventually(ctx, withinDeadline(time.Now().Add(iv.Timeout.D()), f)).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D())
}

// withinDeadline bounds the context Gomega hands a polled function by the
// wait's deadline. Gomega passes the spec's context unchanged, so without
// this one call that hangs (a scrape of a /metrics that never answers)
// runs on to its own client timeout, past the interval. The deadline is
// taken just before Gomega starts its timer, so a hung call ends first and
// the wait's failure carries that call's error. Polled functions without a
// context cannot be bounded and are returned as they are.
func withinDeadline(deadline time.Time, f any) any {
	bound := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithDeadline(ctx, deadline)
	}
	switch f := f.(type) {
	case func(Gomega, context.Context):
		return func(g Gomega, ctx context.Context) {
			ctx, cancel := bound(ctx)
			defer cancel()
			f(g, ctx)
		}
	case func(context.Context) error:
		return func(ctx context.Context) error {
			ctx, cancel := bound(ctx)
			defer cancel()
			return f(ctx)
		}
	case func(context.Context) bool:
		return func(ctx context.Context) bool {
			ctx, cancel := bound(ctx)
			defer cancel()
			return f(ctx)
		}
	}
	return f
}

// consistently is Consistently with the interval of claim/op from e2e.yaml.
func (t Target) consistently(ctx context.Context, claim, op string, f any) AsyncAssertion {
	GinkgoHelper()
	iv := intervalOf(t.Config, claim, op)
	return Consistently(ctx, f).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D())
}

// settle polls read with the interval of claim/op until m matches what it
// read, like eventually, but returns the last reading (and read's last
// error) instead of failing, so the caller can record the evidence before
// it asserts with Expect(last).To(m).
func settle[T any](ctx context.Context, t Target, claim, op string, read func(context.Context) (T, error), m types.GomegaMatcher) (T, error) {
	GinkgoHelper()
	var last T
	var lastErr error
	quiet := NewGomega(func(string, ...int) {})
	iv := intervalOf(t.Config, claim, op)
	quiet.Eventually(ctx, withinDeadline(time.Now().Add(iv.Timeout.D()), func(ctx context.Context) bool {
		v, err := read(ctx)
		if lastErr = err; err != nil {
			return false
		}
		last = v
		ok, err := m.Match(v)
		return err == nil && ok
	})).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D()).Should(BeTrue())
	if lastErr == nil && ctx.Err() != nil {
		lastErr = ctx.Err()
	}
	return last, lastErr
}

// reading is the last scrape a settle judged, with the matcher that judged
// it: asserted with expect after the evidence is recorded, so a failure
// message shows the matcher's evidence and the report has every reading.
type reading struct {
	what    string
	after   metrics.Snapshot
	err     error // the scrape's, when none succeeded
	matcher types.GomegaMatcher
}

func (r reading) expect() {
	GinkgoHelper()
	Expect(r.err).NotTo(HaveOccurred(), "scraping %s", r.what)
	Expect(r.after).To(r.matcher, r.what)
}

// build is fixtures.ModelDeployment named name, failing on error.
func (t Target) build(p api.Pair, name string, opts ...fixtures.Option) *api.ModelDeployment {
	GinkgoHelper()
	md, err := fixtures.ModelDeployment(t.Config, p, append([]fixtures.Option{fixtures.WithName(name)}, opts...)...)
	Expect(err).NotTo(HaveOccurred())
	return md
}

// objectName is a DNS label for a spec's ModelDeployment: <spec>-<pair>.
func objectName(spec string, p api.Pair) string {
	name := dnsLabel(spec + "-" + p.Slug())
	// Leave room for the Pods' -server-xxxxx and -router-xxxxxxxxxx-xxxxx.
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-")
	}
	return name
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

func dnsLabel(s string) string {
	s = strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}

// ready is the deployment of in.Pair created with routerArgs, Ready: the
// shared one when the spec has it, else one of the spec's own named
// <claim>-<pair>. It skips when a target with finite capacity has no room.
func (in Input) ready(ctx context.Context, claim string, routerArgs []string) clusters.Deployment {
	GinkgoHelper()
	d := in.Deployment
	if d == nil {
		d = in.own(in.Pair, objectName(claim, in.Pair), routerArgs...)
	} else {
		Expect(d.RouterArgs).To(Equal(routerArgs), "invalid argument: input.Deployment %s was created with router args %q; %s is documented with %q",
			d.Name, d.RouterArgs, claim, routerArgs)
	}
	return d.Ready(ctx, in.Target, claim)
}

// replicas lists the engine replicas, expecting the configured count.
func (t Target) replicas(ctx context.Context, dep clusters.Deployment) []clusters.Replica {
	GinkgoHelper()
	rs, err := dep.Replicas(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(rs).To(HaveLen(int(t.Config.Replicas)), "engine replicas of %s", dep.Name())
	return rs
}

// scrapeEngines takes one engine scrape per replica, keyed by replica name.
func scrapeEngines(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica) map[string]metrics.Snapshot {
	GinkgoHelper()
	out, err := engineSnapshots(ctx, dep, rs)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// engineSnapshots is scrapeEngines for a poll, returning the first error.
func engineSnapshots(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica) (map[string]metrics.Snapshot, error) {
	out := map[string]metrics.Snapshot{}
	for _, r := range rs {
		s, err := dep.EngineMetrics(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("scraping engine %s: %w", r.Name, err)
		}
		out[r.Name] = s
	}
	return out, nil
}

func replicaNames(rs []clusters.Replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// routerMetrics scrapes every router Pod.
func routerMetrics(ctx context.Context, dep clusters.Deployment) metrics.Snapshot {
	GinkgoHelper()
	s, err := dep.RouterMetrics(ctx)
	Expect(err).NotTo(HaveOccurred(), "scraping the router's metrics")
	return s
}

// plan is the config's serial chat plan against dep: the shared prefix,
// streaming and non-streaming in turn. Every plan has a fresh nonce, so its
// prompts share nothing with earlier traffic on the same deployment.
func (t Target) plan(ctx context.Context, dep clusters.Deployment, requests int) traffic.Plan {
	GinkgoHelper()
	base, err := dep.OpenAIBaseURL(ctx)
	Expect(err).NotTo(HaveOccurred())
	return traffic.Plan{
		BaseURL:        base,
		Model:          t.Config.Model.Name,
		Requests:       requests,
		Concurrency:    1,
		Mode:           traffic.ModeAlternate,
		MaxTokens:      t.Config.Traffic.MaxTokens,
		RequestTimeout: t.Config.Traffic.RequestTimeout.D(),
		Prompts:        traffic.PromptSet{Kind: traffic.PromptsSharedPrefix, PrefixChars: t.Config.Traffic.PrefixChars},
	}
}

// progressSink is this process's line to cmd/e2e's live traffic display;
// nil when the suite runs without it.
var progressSink = sync.OnceValue(progress.Open)

// withProgress makes plan report its traffic as it goes: to cmd/e2e, which
// draws a live line per spec, or, when the suite runs without it, as a line
// of the spec's output every few seconds.
func withProgress(plan traffic.Plan) traffic.Plan {
	spec := specLabel(CurrentSpecReport())
	proc := GinkgoParallelProcess()
	sink := progressSink()
	if sink == nil {
		plan.ProgressEvery = 5 * time.Second
		plan.Progress = func(p traffic.Progress) {
			GinkgoWriter.Printf("traffic %s\n", progress.Event{Spec: spec, Done: p.Done, Total: p.Total, Errors: p.Errors, Elapsed: p.Elapsed, Final: p.Final})
		}
		return plan
	}
	plan.ProgressEvery = 500 * time.Millisecond
	plan.Progress = func(p traffic.Progress) {
		// A full pipe drops the line; the next one says the same and more.
		_ = sink.Send(progress.Event{Proc: proc, Spec: spec, Done: p.Done, Total: p.Total, Errors: p.Errors, Elapsed: p.Elapsed, Final: p.Final})
	}
	return plan
}

// specLabel names a spec in a progress line: "<claim> <pair>" from its
// labels, else its own text.
func specLabel(r SpecReport) string {
	var claim, router, engine string
	for _, l := range r.Labels() {
		key, value, _ := strings.Cut(l, ":")
		switch key {
		case "feature":
			claim = value
		case "router":
			router = value
		case "engine":
			engine = value
		}
	}
	if claim == "" || router == "" {
		return r.LeafNodeText
	}
	return claim + " " + router + "+" + engine
}

// send runs plan within <claim>/traffic and fails on any failed request,
// naming the first ones; a run cut by that interval (a router that never
// answers) fails saying how many requests were left unanswered.
func (t Target) send(ctx context.Context, claim string, plan traffic.Plan) *traffic.Report {
	GinkgoHelper()
	endpoint := plan.Endpoint
	if endpoint == "" {
		endpoint = traffic.DefaultEndpoint
	}
	By(fmt.Sprintf("sending %d requests to %s (concurrency %d, %s, %s prompts of %d characters)", plan.Requests, endpoint,
		max(plan.Concurrency, 1), plan.Mode, plan.Prompts.Kind, plan.Prompts.PrefixChars))
	rep, err := t.runTraffic(ctx, claim, plan)
	Expect(err).NotTo(HaveOccurred(), func() string { return fmt.Sprint(err) })
	var bad []string
	for _, r := range rep.Results {
		if r.Class != traffic.ClassOK && len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("#%d %s status %d: %s %s", r.Index, r.Class, r.Status, r.Error, r.ErrorBody))
		}
	}
	Expect(rep.Summary.Failed).To(BeZero(), "%d of %d requests failed; first: %s", rep.Summary.Failed, rep.Summary.Requests, strings.Join(bad, "; "))
	return rep
}

// runTraffic runs plan within <claim>/traffic. A run the interval cuts
// short is an error that says so, with what was still unanswered; the
// report is returned either way.
func (t Target) runTraffic(ctx context.Context, claim string, plan traffic.Plan) (*traffic.Report, error) {
	GinkgoHelper()
	within := intervalOf(t.Config, claim, config.OpTraffic).Timeout.D()
	rctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	rep, err := traffic.Run(rctx, withProgress(plan))
	if err != nil && rep != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return rep, fmt.Errorf("traffic to %s did not finish within %s/%s (%s): %d of %d requests still unanswered or unsent, %d answered OK, %d failed (is the router answering?)",
			plan.BaseURL, claim, config.OpTraffic, within, rep.Summary.Canceled, rep.Summary.Requests, rep.Summary.OK, rep.Summary.Failed)
	}
	return rep, err
}

// measureSplit scrapes the engines until their request counters account for
// every request sent (counters move when a request finishes), then returns
// the per-replica split: the deltas over this spec's traffic only.
func (t Target) measureSplit(ctx context.Context, claim string, dep clusters.Deployment, p api.Pair, rs []clusters.Replica,
	before map[string]metrics.Snapshot, sent int) split.Split {
	GinkgoHelper()
	return t.splitOnce(ctx, claim, dep, p, rs, before, assertions.HaveTotal(sent), "account for every request sent")
}

// splitOnce scrapes the engines, within <claim>/wait-metrics, until the
// split of their request counters since before matches m (what it means
// in words: why), and returns it.
func (t Target) splitOnce(ctx context.Context, claim string, dep clusters.Deployment, p api.Pair, rs []clusters.Replica,
	before map[string]metrics.Snapshot, m types.GomegaMatcher, why string) split.Split {
	GinkgoHelper()
	counter, err := split.RequestCounter(p.Engine)
	Expect(err).NotTo(HaveOccurred())
	var s split.Split
	t.eventually(ctx, claim, config.OpWaitMetrics, func(g Gomega, ctx context.Context) {
		after, err := engineSnapshots(ctx, dep, rs)
		g.Expect(err).NotTo(HaveOccurred())
		s, err = split.FromSnapshots(counter, replicaNames(rs), before, after)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s).To(m, "engine counters %s %s", counter, why)
	}).Should(Succeed())
	return s
}

// splitEntry is the report's view of a split.
func splitEntry(claim string, p api.Pair, title string, s split.Split, rs []clusters.Replica, sent, failed int, expected string) report.Split {
	e := report.Split{Claim: claim, Pair: p.String(), Title: title, Source: s.Counter, Requests: sent, Failures: failed, Expected: expected}
	for _, r := range rs {
		e.Replicas = append(e.Replicas, report.ReplicaCount{Replica: r.Name, Address: r.URL(), Count: float64(s.Count(r.Name))})
	}
	return e
}

// expectShape asserts a split against its documented shape.
func expectShape(s split.Split, shape fixtures.Split, sent int) {
	GinkgoHelper()
	switch shape.Shape {
	case fixtures.ShapeOneReplica:
		Expect(s).To(assertions.BeAllOnOneReplica(), "documented: all on one replica (%s)", shape.Documented)
		Expect(s).To(assertions.HaveTotal(sent))
	case fixtures.ShapeEven:
		want := shape.Expected(sent, len(s.Replicas))
		Expect(want).NotTo(BeNil(), "%d requests do not divide evenly over %d replicas; set traffic.requests to a multiple", sent, len(s.Replicas))
		Expect(s).To(assertions.HaveCounts(want...), "documented: %s", shape.Documented)
	case fixtures.ShapeRecorded:
		// Documented as measured, not as a shape: recorded in the report only.
	default:
		Fail("unknown split shape " + shape.Shape)
	}
}

// shapeWords describes a documented shape for the report.
func shapeWords(shape fixtures.Split, sent, replicas int) string {
	switch shape.Shape {
	case fixtures.ShapeOneReplica:
		return fmt.Sprintf("all %d on one replica (documented %s)", sent, shape.Documented)
	case fixtures.ShapeEven:
		parts := make([]string, replicas)
		for i := range parts {
			parts[i] = fmt.Sprint(sent / max(replicas, 1))
		}
		return fmt.Sprintf("%s of %d (documented %s)", strings.Join(parts, "/"), sent, shape.Documented)
	}
	return fmt.Sprintf("recorded, not asserted (documented %s)", shape.Documented)
}

// workerValues are the label values a series should carry, one per replica.
func workerValues(rs []clusters.Replica, form string) []string {
	var out []string
	for _, r := range rs {
		switch form {
		case fixtures.WorkerPodRank:
			out = append(out, r.Name+"-rank-0")
		default:
			out = append(out, r.URL())
		}
	}
	sort.Strings(out)
	return out
}

// labelMatchers turns an expectation's fixed labels into matchers.
func labelMatchers(labels map[string]string) []metrics.Matcher {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ms []metrics.Matcher
	for _, k := range keys {
		ms = append(ms, metrics.Eq(k, labels[k]))
	}
	return ms
}

// waitBanner waits for the router's startup banner in its current logs.
func (t Target) waitBanner(ctx context.Context, claim string, dep clusters.Deployment) routerlog.Banner {
	GinkgoHelper()
	By("reading the router's startup banner")
	var b routerlog.Banner
	t.eventually(ctx, claim, config.OpWaitLogs, func(ctx context.Context) error {
		logs, err := dep.RouterLogs(ctx, clusters.LogOptions{})
		if err != nil {
			return err
		}
		b, err = routerlog.FindBanner(logs)
		return err
	}).Should(Succeed())
	return b
}

// bannerPolicy is the policy part of an expect.yaml banner, "policy: <Debug
// form>", as HaveStartedWithPolicy takes it.
func bannerPolicy(banner string) (string, error) {
	policy, ok := strings.CutPrefix(banner, "policy: ")
	if !ok {
		return "", fmt.Errorf("banner %q must be written \"policy: <the policy as the router prints it>\"", banner)
	}
	return policy, nil
}

// expectBanner asserts the banner shows the documented policy.
func expectBanner(b routerlog.Banner, documented string) {
	GinkgoHelper()
	policy, err := bannerPolicy(documented)
	Expect(err).NotTo(HaveOccurred(), "fixtures/expect.yaml")
	Expect(b).To(assertions.HaveStartedWithPolicy(policy), "the router's startup banner")
}
