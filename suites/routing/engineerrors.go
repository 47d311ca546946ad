package routing

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimEngineErrors: the replica serial traffic goes to answers a 5xx on
// its OpenAI paths (clusters.FaultInjector.InjectHTTPFault). The argv
// routers retry each request on it until their attempts run out, their
// retry counters rise by exactly the derived numbers, and once its circuit
// opens the other replica serves: a fixed number of requests fail.
const ClaimEngineErrors = "engineerrors"

var _ = framework.Add(Registry, faultClaim(ClaimEngineErrors, "An engine answering 5xx",
	"the replica serial traffic goes to answers 503: exactly 2 requests fail after 5 attempts each "+
		"(`..._retries_total` +8, `..._retries_exhausted_total` +2), then its circuit opens and the other replica "+
		"serves; not applicable to llm-d-router (no retry policy, no circuit breaker, no error count for an engine's 5xx)",
	engineErrors))

// engineErrors makes the replica the traffic goes to answer the row's
// status on /v1/, then lifts it.
func engineErrors(ctx context.Context, fr *faultRun) {
	GinkgoHelper()
	f := fr.in.Expect.Fault
	Expect(f.Status).To(BeNumerically(">=", 500), "fixtures/expect.yaml: %s's fault needs its 5xx status", fr.in.Claim)
	rs := fr.in.Replicas(ctx, fr.dep)
	before := framework.ScrapeEngines(ctx, fr.dep, rs)
	l := fr.warm(ctx)
	victim := fr.busiest(ctx, rs, before)
	routerBefore := framework.RouterMetrics(ctx, fr.dep)
	By(fmt.Sprintf("making engine Pod %s answer %d on /v1/ while traffic runs", victim.Name, f.Status))
	lift, err := fr.fi.InjectHTTPFault(ctx, victim.Name, clusters.HTTPFault{Port: victim.Port, PathPrefix: "/v1/", Status: f.Status,
		Body: fmt.Sprintf(`{"error":{"message":"injected by the routing conformance suite","type":"%d","code":%d}}`, f.Status, f.Status)})
	framework.SkipUnsupported(err, "injecting the engine fault")
	DeferCleanup(lift)
	t0 := time.Now()
	// The circuit opens after a fixed number of failed attempts; then the
	// other replica answers everything.
	fr.in.WaitOK(ctx, l, 2*framework.LoadBatch, t0)
	lift()
	lifted := time.Now()
	fr.in.WaitOK(ctx, l, framework.LoadBatch, lifted)
	s := l.Stop()
	recovery := l.FirstAnswer(lifted)
	var rises []string
	var checks []framework.Reading
	for _, c := range f.Counters {
		ms := framework.LabelMatchers(c.Labels)
		r := fr.in.SettleRouter(ctx, fr.dep, fmt.Sprintf("the router's %s over the fault", metrics.Selector(c.Name, ms)),
			assertions.HaveCounterRisenBy(routerBefore, c.Name, c.Rise, ms...))
		if r.Err == nil {
			got, _ := metrics.Delta(routerBefore, r.After, c.Name, ms...)
			rises = append(rises, fmt.Sprintf("%s +%s (stated +%s)", metrics.Selector(c.Name, ms), metrics.FormatValue(got), metrics.FormatValue(c.Rise)))
		}
		checks = append(checks, r)
	}
	fr.record(fmt.Sprintf("engine Pod %s answered %d on /v1/", victim.Name, f.Status), s, recovery, fmt.Sprint(rises))
	for _, r := range checks {
		r.Expect()
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
