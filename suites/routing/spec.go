package routing

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
)

// Labels every documented-claim spec carries besides router:, engine: and feature:.
const (
	LabelDocumented = "claim:documented"
	LabelServer     = "topology:server"
	// LabelNeedsGPU marks specs that run engines: on a real cluster they
	// need accelerators; `--label-filter='!needs:gpu'` runs the rest.
	LabelNeedsGPU = "needs:gpu"
)

// claimLabels are the labels of claim's container.
func claimLabels(claim string, more ...string) Labels {
	return append(Labels{LabelDocumented, fixtures.FeatureLabel(claim), LabelServer}, more...)
}

// policyLabel names the policy a pair's claim runs under: the --policy the
// expectation documents, else the router's default.
func policyLabel(claim string, p fixtures.Pair) string {
	exp, err := fixtures.Lookup(claim, p)
	if err == nil {
		for i, a := range exp.RouterArgs {
			if a == "--policy" && i+1 < len(exp.RouterArgs) {
				return "policy:" + exp.RouterArgs[i+1]
			}
		}
	}
	if p.Router == api.RouterLLMD {
		return "policy:llm-d-scoring"
	}
	return "policy:cache_aware"
}

// pairLabels are a pair's router:, engine: and policy: labels for claim.
func pairLabels(claim string, p fixtures.Pair) Labels {
	return append(Labels(p.Labels()), policyLabel(claim, p))
}

// check fails the spec when the suite handed a spec an incomplete input.
func (t Target) check(spec string, p fixtures.Pair) {
	GinkgoHelper()
	Expect(t.Config).NotTo(BeNil(), "invalid argument: input.Config can't be nil when calling %s", spec)
	Expect(t.Cluster).NotTo(BeNil(), "invalid argument: input.Cluster can't be nil when calling %s", spec)
	Expect(p.Router).NotTo(BeEmpty(), "invalid argument: input.Pair.Router can't be empty when calling %s", spec)
	Expect(p.Engine).NotTo(BeEmpty(), "invalid argument: input.Pair.Engine can't be empty when calling %s", spec)
}

// expectation returns the documented outcome of claim for p, skipping the
// spec when the docs say the claim does not apply to the pair.
func expectation(claim string, p fixtures.Pair) fixtures.Expectation {
	GinkgoHelper()
	exp, err := fixtures.Lookup(claim, p)
	Expect(err).NotTo(HaveOccurred())
	if exp.NotApplicable != "" {
		Skip("not applicable: " + exp.NotApplicable)
	}
	return exp
}

// requireConfigured skips a pair the config does not qualify.
func (t Target) requireConfigured(p fixtures.Pair) {
	GinkgoHelper()
	if !slices.Contains(fixtures.Matrix(t.Config), p) {
		Skip(fmt.Sprintf("%s is not qualified in this run: %s lists routers %v and engines %v", p, t.Config.File(), routerNames(t.Config), engineNames(t.Config)))
	}
}

// requireRunnable skips a pair the config does not qualify or the target
// cannot run, with the target's reason.
func (t Target) requireRunnable(p fixtures.Pair) {
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

// intervalOf is the [timeout, poll] of op in spec; an unknown key fails.
func intervalOf(cfg *config.Config, spec, op string) config.Interval {
	GinkgoHelper()
	iv, err := cfg.Interval(spec, op)
	Expect(err).NotTo(HaveOccurred())
	return iv
}

// eventually is Eventually with the interval of spec/op from e2e.yaml.
func (t Target) eventually(ctx context.Context, spec, op string, f any) AsyncAssertion {
	GinkgoHelper()
	iv := intervalOf(t.Config, spec, op)
	return Eventually(ctx, f).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D())
}

// consistently is Consistently with the interval of spec/op from e2e.yaml.
func (t Target) consistently(ctx context.Context, spec, op string, f any) AsyncAssertion {
	GinkgoHelper()
	iv := intervalOf(t.Config, spec, op)
	return Consistently(ctx, f).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D())
}

// settle polls f with the interval of spec/op until it returns nil, like
// eventually, but returns f's last error instead of failing the spec, so
// the caller can record the evidence before it asserts.
func (t Target) settle(ctx context.Context, spec, op string, f func(context.Context) error) error {
	GinkgoHelper()
	var last error
	quiet := NewGomega(func(string, ...int) {})
	iv := intervalOf(t.Config, spec, op)
	quiet.Eventually(ctx, func(ctx context.Context) error {
		last = f(ctx)
		return last
	}).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D()).Should(Succeed())
	if last == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return last
}

// build is fixtures.ModelDeployment named for the spec, failing on error.
func (t Target) build(p fixtures.Pair, name string, opts ...fixtures.Option) *api.ModelDeployment {
	GinkgoHelper()
	md, err := fixtures.ModelDeployment(t.Config, p, append([]fixtures.Option{fixtures.WithName(name)}, opts...)...)
	Expect(err).NotTo(HaveOccurred())
	return md
}

// objectName is a DNS label for a spec's ModelDeployment: <spec>-<pair>.
func objectName(spec string, p fixtures.Pair) string {
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

// deploy creates md and registers its cleanup: on failure (or always, as
// configured) the deployment's artifacts go to artifacts/<spec>/ first, then
// it is deleted (unless skipCleanup). A refusal fails the spec.
func (t Target) deploy(ctx context.Context, spec string, md *api.ModelDeployment) clusters.Deployment {
	GinkgoHelper()
	Expect(md.Spec.Router).NotTo(BeNil(), "the suite deploys routed ModelDeployments only")
	Expect(md.Spec.Roles).NotTo(BeEmpty())
	By(fmt.Sprintf("creating ModelDeployment %s (%s in front of %d %s replicas, router args %q)", md.Metadata.Name,
		md.Spec.Router.Name, md.Spec.Roles[0].RoleReplicas(), md.Spec.Engine.Name, md.Spec.Router.ExtraArgs))
	dep, err := t.Cluster.Deploy(ctx, md)
	Expect(err).NotTo(HaveOccurred(), "creating %s", md.Metadata.Name)
	t.cleanup(spec, dep)
	return dep
}

// cleanup deletes dep when the spec ends, after collecting its artifacts.
// DeferCleanup is LIFO, so the collection registered last runs first.
func (t Target) cleanup(spec string, dep clusters.Deployment) {
	GinkgoHelper()
	deleted := intervalOf(t.Config, spec, config.OpWaitDeleted)
	if !t.Config.SkipCleanup {
		DeferCleanup(func(ctx SpecContext) {
			By("deleting " + dep.Name())
			Expect(dep.Delete(ctx)).To(Succeed(), "deleting %s/%s", dep.Namespace(), dep.Name())
		}, NodeTimeout(deleted.Timeout.D()))
	}
	DeferCleanup(func(ctx SpecContext) {
		mode := t.Config.CollectArtifacts
		if mode == config.CollectNever || (mode == config.CollectOnFailure && !CurrentSpecReport().Failed()) {
			return
		}
		dir := filepath.Join(t.Config.Artifacts, dnsLabel(CurrentSpecReport().FullText()), dep.Name())
		if err := dep.CollectArtifacts(ctx, dir); err != nil {
			// A partial dump never fails a spec; say what is missing.
			GinkgoWriter.Printf("artifacts of %s are incomplete: %v\n", dep.Name(), err)
		}
		AddReportEntry("artifacts", dir, ReportEntryVisibilityFailureOrVerbose)
	}, NodeTimeout(deleted.Timeout.D()))
}

// waitReady waits, within spec/wait-ready, for the target's own readiness
// gate: phase Ready, RouterReady True and every role serving Confirmed at its
// desired count (operator.md §11). The target stops early on terminal states
// (a router exiting with a clap error, ImagePullBackOff), so a broken
// deployment fails in seconds rather than after the model-load timeout.
func (t Target) waitReady(ctx context.Context, spec string, dep clusters.Deployment) {
	GinkgoHelper()
	iv := intervalOf(t.Config, spec, config.OpWaitReady)
	By(fmt.Sprintf("waiting up to %s for %s to be Ready with every replica confirmed behind the router", iv.Timeout.D(), dep.Name()))
	wctx, cancel := context.WithTimeout(ctx, iv.Timeout.D())
	defer cancel()
	Expect(dep.WaitReady(wctx, iv.Poll.D())).To(Succeed(), "%s/%s did not become Ready", dep.Namespace(), dep.Name())
}

// deployReady is deploy then waitReady, skipped with the reason when a
// target with finite capacity has no room for md now.
func (t Target) deployReady(ctx context.Context, spec string, md *api.ModelDeployment) clusters.Deployment {
	GinkgoHelper()
	if cc, ok := t.Cluster.(clusters.CapacityChecker); ok {
		fits, reason, err := cc.CanRun(ctx, md)
		Expect(err).NotTo(HaveOccurred(), "checking free accelerators for %s", md.Metadata.Name)
		if !fits {
			Skip(fmt.Sprintf("target %s has no room for %s: %s", t.Env.Target, md.Metadata.Name, reason))
		}
	}
	dep := t.deploy(ctx, spec, md)
	t.waitReady(ctx, spec, dep)
	return dep
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

// plan is the config's serial chat plan against dep: the shared prefix,
// streaming and non-streaming in turn.
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

// send runs plan and fails on any failed request, naming the first ones.
func send(ctx context.Context, plan traffic.Plan) *traffic.Report {
	GinkgoHelper()
	endpoint := plan.Endpoint
	if endpoint == "" {
		endpoint = traffic.DefaultEndpoint
	}
	By(fmt.Sprintf("sending %d requests to %s (concurrency %d, %s, %s prompts of %d characters)", plan.Requests, endpoint,
		max(plan.Concurrency, 1), plan.Mode, plan.Prompts.Kind, plan.Prompts.PrefixChars))
	rep, err := traffic.Run(ctx, plan)
	Expect(err).NotTo(HaveOccurred())
	var bad []string
	for _, r := range rep.Results {
		if r.Class != traffic.ClassOK && len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("#%d %s status %d: %s %s", r.Index, r.Class, r.Status, r.Error, r.ErrorBody))
		}
	}
	Expect(rep.Summary.Failed).To(BeZero(), "%d of %d requests failed; first: %s", rep.Summary.Failed, rep.Summary.Requests, strings.Join(bad, "; "))
	return rep
}

// measureSplit scrapes the engines until their request counters account for
// every request sent (counters move when a request finishes), then returns
// the per-replica split.
func (t Target) measureSplit(ctx context.Context, spec string, dep clusters.Deployment, p fixtures.Pair, rs []clusters.Replica,
	before map[string]metrics.Snapshot, sent int) split.Split {
	GinkgoHelper()
	counter, err := split.RequestCounter(p.Engine)
	Expect(err).NotTo(HaveOccurred())
	var s split.Split
	t.eventually(ctx, spec, config.OpWaitMetrics, func(g Gomega, ctx context.Context) {
		after, err := engineSnapshots(ctx, dep, rs)
		g.Expect(err).NotTo(HaveOccurred())
		s, err = split.FromSnapshots(counter, replicaNames(rs), before, after)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Total()).To(Equal(sent), "engine counters %s account for %d of %d requests", counter, s.Total(), sent)
	}).Should(Succeed())
	return s
}

// splitEntry is the report's view of a split.
func splitEntry(claim string, p fixtures.Pair, title string, s split.Split, rs []clusters.Replica, sent, failed int, expected string) report.Split {
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

// since is used to bound log reads to this spec.
func since() time.Time { return CurrentSpecReport().StartTime }
