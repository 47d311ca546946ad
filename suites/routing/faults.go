package routing

// The resilience claims (one file each: deleterouter.go, killengine.go,
// engineerrors.go, metricshang.go, routerhang.go) share this spec
// function: a fault injected into the shared deployment while background
// traffic runs, the failed requests held to the row's bound, the
// deployment whole again within <claim>/recover, and put back as created.

import (
	"context"
	"fmt"
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
)

// faultClaim registers a resilience claim whose specs run FaultSpec.
func faultClaim(name, title string) Claim {
	return register(Claim{
		Name:    name,
		Title:   title,
		Labels:  []string{LabelNeedsGPU},
		Mutates: true,
		Require: func(e fixtures.Expectation) []string {
			return need(nil, e.Fault != nil, name+" needs fault")
		},
		Deployment: documentedArgs,
		Spec: func(_ api.Pair, input func() Input) {
			FaultSpec(name, func() FaultSpecInput { return FaultSpecInput{Input: input()} })
		},
	})
}

// FaultSpecInput is the input of FaultSpec.
type FaultSpecInput struct {
	Input
}

// faultRun is what one fault spec knows while it runs.
type faultRun struct {
	in      FaultSpecInput
	claim   string
	exp     fixtures.Expectation
	dep     clusters.Deployment
	fi      clusters.FaultInjector
	base    string
	engines map[string]string // engine Pod name -> UID before the fault
}

// FaultSpec injects the row's fault (fixtures.Faults) into the claim's
// deployment under background traffic and asserts what the row states.
func FaultSpec(claim string, input func() FaultSpecInput) {
	var (
		in  FaultSpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("FaultSpec", claim)
	})

	It("keeps failed requests within the stated bound and is whole again within its interval", func(ctx SpecContext) {
		dep := in.ready(ctx, claim, exp.RouterArgs)
		fr := &faultRun{in: in, claim: claim, exp: exp, dep: dep, fi: in.injector(dep)}
		in.restoreAfter(ctx, claim, dep)
		var err error
		fr.base, err = dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())
		fr.engines = replicaUIDs(in.replicas(ctx, dep))
		switch exp.Fault.Inject {
		case fixtures.FaultDeleteRouterPod:
			fr.deleteRouter(ctx)
		case fixtures.FaultKillEnginePod:
			fr.killEngine(ctx)
		case fixtures.FaultEngineStatus:
			fr.engineStatus(ctx)
		case fixtures.FaultEngineMetricsHang:
			fr.metricsHang(ctx)
		case fixtures.FaultRouterHang:
			fr.routerHang(ctx)
		default:
			Fail("fixtures/expect.yaml: unknown fault " + exp.Fault.Inject)
		}
	})
}

func (fr *faultRun) concurrency() int {
	if c := fr.exp.Fault.Concurrency; c > 0 {
		return c
	}
	return loadConcurrency
}

// record writes the claim's verdict line and the disruption, and asserts
// the bound.
func (fr *faultRun) record(action string, s loadSummary, recovery time.Duration, extra string) {
	GinkgoHelper()
	d := fr.in.disrupted(fr.claim, action, s, fr.concurrency(), fr.exp.Fault.Failed, recovery)
	measured := fmt.Sprintf("%s: %d of %d requests failed (bound %d = %s)", action, s.Failed, s.Requests, d.FailedBound, d.Bound)
	if recovery > 0 {
		measured += fmt.Sprintf("; whole again after %.2fs (bound %.0fs)", recovery.Seconds(), d.RecoveryBoundSeconds)
	}
	if extra != "" {
		measured += "; " + extra
	}
	report.Record(report.Claim{Claim: fr.claim, Pair: fr.in.Pair.String(), Expected: fr.exp.Summary, Measured: measured})
	expectWithinBound(d, fr.exp.Fault.Failed.Why)
}

// warm starts the background traffic and waits until it flows.
func (fr *faultRun) warm(ctx context.Context) *load {
	GinkgoHelper()
	l := fr.in.startLoad(ctx, fr.claim, fr.base, fr.concurrency())
	fr.in.waitOK(ctx, fr.claim, l, 2*loadBatch, time.Now())
	return l
}

// busiest is the replica whose engine counter rose most since before:
// the one the traffic goes to, which the fault then hits.
func (fr *faultRun) busiest(ctx context.Context, rs []clusters.Replica, before map[string]metrics.Snapshot) clusters.Replica {
	GinkgoHelper()
	s := fr.in.splitOnce(ctx, fr.claim, fr.dep, fr.in.Pair, rs, before,
		WithTransform(func(s split.Split) int { return s.Total() }, BeNumerically(">", 0)), "rose")
	pick := rs[0]
	for _, r := range rs {
		if s.Count(r.Name) > s.Count(pick.Name) {
			pick = r
		}
	}
	return pick
}

// expectEnginesUnchanged asserts the engine Pods are those from before.
func (fr *faultRun) expectEnginesUnchanged(ctx context.Context, why string) {
	GinkgoHelper()
	Expect(replicaUIDs(fr.in.replicas(ctx, fr.dep))).To(Equal(fr.engines), "engine Pods (name: UID) before and after: %s", why)
}

// deleteRouter: kubectl delete pod on the router under traffic.
func (fr *faultRun) deleteRouter(ctx context.Context) {
	GinkgoHelper()
	ps, err := fr.dep.RouterState(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(ps).NotTo(BeEmpty())
	old := routerUIDs(ctx, fr.dep)
	l := fr.warm(ctx)
	By("deleting router Pod " + ps[0].Name + " while traffic runs")
	t0 := time.Now()
	Expect(fr.fi.DeleteRouterPod(ctx, ps[0].Name)).To(Succeed())
	pods := fr.in.waitRouterPods(ctx, fr.claim, fr.dep, len(ps), old)
	fr.in.whole(ctx, fr.claim, fr.dep)
	recovery := time.Since(t0)
	fr.in.waitOK(ctx, fr.claim, l, loadBatch, time.Now())
	s := l.stop()
	fr.record(fmt.Sprintf("deleted router Pod %s, replaced by %s", ps[0].Name, pods[0].Name), s, recovery, "")
	fr.expectEnginesUnchanged(ctx, "deleting the router Pod must not touch the engines")
}

// killEngine: the busiest engine Pod killed under traffic.
func (fr *faultRun) killEngine(ctx context.Context) {
	GinkgoHelper()
	rs := fr.in.replicas(ctx, fr.dep)
	before := scrapeEngines(ctx, fr.dep, rs)
	l := fr.warm(ctx)
	victim := fr.busiest(ctx, rs, before)
	By(fmt.Sprintf("killing engine Pod %s (zero grace period) while traffic runs", victim.Name))
	t0 := time.Now()
	Expect(fr.fi.KillEnginePod(ctx, victim)).To(Succeed())
	fr.in.whole(ctx, fr.claim, fr.dep)
	var now []clusters.Replica
	fr.in.eventually(ctx, fr.claim, config.OpRecover, func(g Gomega, ctx context.Context) {
		var err error
		now, err = fr.dep.Replicas(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now).To(HaveLen(len(rs)))
		g.Expect(replicaUIDs(now)).NotTo(ContainElement(victim.UID), "the killed Pod is gone")
	}).Should(Succeed())
	fr.in.whole(ctx, fr.claim, fr.dep)
	recovery := time.Since(t0)
	fr.in.waitOK(ctx, fr.claim, l, loadBatch, time.Now())
	s := l.stop()
	var replacement string
	for _, r := range now {
		if _, had := fr.engines[r.Name]; !had {
			replacement = r.Name
		}
	}
	fr.record(fmt.Sprintf("killed engine Pod %s, replaced by %s", victim.Name, replacement), s, recovery, "")
	survivors := map[string]string{}
	for name, uid := range fr.engines {
		if name != victim.Name {
			survivors[name] = uid
		}
	}
	for _, r := range now {
		if _, ok := survivors[r.Name]; ok {
			Expect(r.UID).To(Equal(survivors[r.Name]), "the surviving replica %s was not replaced", r.Name)
			delete(survivors, r.Name)
		}
	}
	Expect(survivors).To(BeEmpty(), "surviving replicas missing after the kill")
	Expect(replacement).NotTo(BeEmpty(), "a replacement engine Pod with a new name")
}

// engineStatus: the replica the traffic goes to answers Status on /v1/.
func (fr *faultRun) engineStatus(ctx context.Context) {
	GinkgoHelper()
	f := fr.exp.Fault
	rs := fr.in.replicas(ctx, fr.dep)
	before := scrapeEngines(ctx, fr.dep, rs)
	l := fr.warm(ctx)
	victim := fr.busiest(ctx, rs, before)
	routerBefore := routerMetrics(ctx, fr.dep)
	By(fmt.Sprintf("making engine Pod %s answer %d on /v1/ while traffic runs", victim.Name, f.Status))
	lift, err := fr.fi.InjectHTTPFault(ctx, victim.Name, clusters.HTTPFault{Port: victim.Port, PathPrefix: "/v1/", Status: f.Status,
		Body: fmt.Sprintf(`{"error":{"message":"injected by the routing conformance suite","type":"%d","code":%d}}`, f.Status, f.Status)})
	skipUnsupported(err, "injecting the engine fault")
	DeferCleanup(lift)
	t0 := time.Now()
	// The circuit opens after a fixed number of failed attempts; then the
	// other replica answers everything.
	fr.in.waitOK(ctx, fr.claim, l, 2*loadBatch, t0)
	lift()
	lifted := time.Now()
	fr.in.waitOK(ctx, fr.claim, l, loadBatch, lifted)
	s := l.stop()
	recovery := l.firstAnswer(lifted)
	var rises []string
	var checks []reading
	for _, c := range f.Counters {
		ms := labelMatchers(c.Labels)
		r := reading{what: fmt.Sprintf("the router's %s over the fault", metrics.Selector(c.Name, ms)),
			matcher: assertions.HaveCounterRisenBy(routerBefore, c.Name, c.Rise, ms...)}
		r.after, r.err = settle(ctx, fr.in.Target, fr.claim, config.OpWaitMetrics, fr.dep.RouterMetrics, r.matcher)
		if r.err == nil {
			got, _ := metrics.Delta(routerBefore, r.after, c.Name, ms...)
			rises = append(rises, fmt.Sprintf("%s +%s (stated +%s)", metrics.Selector(c.Name, ms), metrics.FormatValue(got), metrics.FormatValue(c.Rise)))
		}
		checks = append(checks, r)
	}
	fr.record(fmt.Sprintf("engine Pod %s answered %d on /v1/", victim.Name, f.Status), s, recovery, fmt.Sprint(rises))
	for _, r := range checks {
		r.expect()
	}
	// The open circuit keeps the faulted replica out for the breaker's
	// timeout (60 s): a fresh router Pod starts with closed circuits, so the
	// deployment is whole at once for the claims after this one.
	ps, err := fr.dep.RouterState(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, p := range ps {
		Expect(fr.fi.DeleteRouterPod(ctx, p.Name)).To(Succeed())
	}
}

// metricsHang: one engine's /metrics never answers under traffic; the
// suite's split measurement fails within its interval naming the Pod,
// and succeeds once the hang is lifted.
func (fr *faultRun) metricsHang(ctx context.Context) {
	GinkgoHelper()
	rs := fr.in.replicas(ctx, fr.dep)
	victim := rs[0]
	before := scrapeEngines(ctx, fr.dep, rs)
	port := victim.MetricsPort
	if port == 0 {
		port = victim.Port
	}
	By(fmt.Sprintf("making engine Pod %s's /metrics hang", victim.Name))
	lift, err := fr.fi.InjectHTTPFault(ctx, victim.Name, clusters.HTTPFault{Port: port, PathPrefix: "/metrics", Hang: true})
	skipUnsupported(err, "injecting the metrics hang")
	DeferCleanup(lift)
	l := fr.warm(ctx)
	s := l.stop()

	iv := intervalOf(fr.in.Config, fr.claim, config.OpWaitMetrics)
	By(fmt.Sprintf("measuring the split while %s's /metrics hangs: it must fail within %s/wait-metrics (%s)", victim.Name, fr.claim, iv.Timeout.D()))
	start := time.Now()
	failures := InterceptGomegaFailures(func() {
		fr.in.measureSplit(ctx, fr.claim, fr.dep, fr.in.Pair, rs, before, s.OK)
	})
	took := time.Since(start)
	lift()
	lifted := time.Now()
	split := fr.in.measureSplit(ctx, fr.claim, fr.dep, fr.in.Pair, rs, before, s.OK)
	recovery := time.Since(lifted)
	first := ""
	if len(failures) > 0 {
		first = lineWith(failures[0], victim.Name)
	}
	fr.record(fmt.Sprintf("engine Pod %s's /metrics hung", victim.Name), s, recovery,
		fmt.Sprintf("the suite's split measurement failed after %.2fs (interval %s): %q; after lifting, split %s", took.Seconds(), iv.Timeout.D(), first, split.Ratio()))
	Expect(failures).NotTo(BeEmpty(), "measuring a split with a hung /metrics must fail")
	Expect(failures[0]).To(ContainSubstring(victim.Name), "the failure names the Pod whose scrape hung")
	// The wait's deadline ends the hung scrape (withinDeadline); hangSlack
	// covers handing the failure back.
	Expect(took).To(BeNumerically("<", iv.Timeout.D()+hangSlack), "the hung scrape failed the measurement within its interval (+%s)", hangSlack)
}

// routerHang: the router Pod accepts connections on 8081 and never
// answers; the suite's traffic fails within <claim>/traffic, saying so.
func (fr *faultRun) routerHang(ctx context.Context) {
	GinkgoHelper()
	ps, err := fr.dep.RouterState(ctx)
	Expect(err).NotTo(HaveOccurred())
	var lifts []func()
	for _, p := range ps {
		lift, err := fr.fi.InjectHTTPFault(ctx, p.Name, clusters.HTTPFault{Port: api.RouterHTTPPort, Hang: true})
		skipUnsupported(err, "injecting the router hang")
		DeferCleanup(lift)
		lifts = append(lifts, lift)
	}
	iv := intervalOf(fr.in.Config, fr.claim, config.OpTraffic)
	const sent = 4
	By(fmt.Sprintf("sending %d requests to a router that never answers: the run must fail within %s/traffic (%s)", sent, fr.claim, iv.Timeout.D()))
	start := time.Now()
	failures := InterceptGomegaFailures(func() {
		fr.in.send(ctx, fr.claim, fr.in.plan(ctx, fr.dep, sent))
	})
	took := time.Since(start)
	for _, lift := range lifts {
		lift()
	}
	lifted := time.Now()
	rep := fr.in.send(ctx, fr.claim, fr.in.plan(ctx, fr.dep, sent))
	recovery := time.Since(lifted)
	first := ""
	if len(failures) > 0 {
		first = lineWith(failures[0], "did not finish")
	}
	fr.record(fmt.Sprintf("router Pod(s) accepted and never answered for %.2fs", took.Seconds()),
		loadSummary{Requests: sent, Failed: sent}, recovery,
		fmt.Sprintf("the traffic failed after %.2fs (interval %s): %q; after lifting %d of %d answered", took.Seconds(), iv.Timeout.D(), first, rep.Summary.OK, sent))
	Expect(failures).NotTo(BeEmpty(), "traffic to a router that never answers must fail")
	Expect(failures[0]).To(ContainSubstring("did not finish within %s/traffic", fr.claim))
	Expect(took).To(BeNumerically("<", iv.Timeout.D()+time.Second), "the run ended within its interval")
}

// hangSlack is how far past its interval a wait on a call that hangs may
// end: the time to cancel the call and hand its error to the wait, not
// another timeout (the wait's deadline bounds each call).
const hangSlack = 500 * time.Millisecond

// lineWith is the first line of a failure message that contains needle
// (else its first line): the line that says what went wrong.
func lineWith(msg, needle string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	for _, l := range lines {
		if strings.Contains(l, needle) {
			return strings.TrimSpace(l)
		}
	}
	return lines[0]
}
