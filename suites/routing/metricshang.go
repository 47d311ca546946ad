package routing

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimMetricsHang: one engine's /metrics never answers while traffic
// runs. No request fails (no router reads an engine's /metrics on the
// request path, and the EPP scores a stale endpoint on its last values);
// the suite's own split measurement fails within its interval naming the
// Pod instead of hanging; once lifted, the counters account for every
// request.
const ClaimMetricsHang = "metricshang"

var _ = framework.Add(Registry, faultClaim(ClaimMetricsHang, "An engine metrics endpoint that hangs",
	"one engine's `/metrics` never answers: no request fails; the suite's split measurement fails within its interval "+
		"naming the Pod; after lifting, the counters account for every request",
	metricsHang))

// metricsHang hangs one engine's /metrics under traffic, measures the
// split while it hangs and once it is lifted.
func metricsHang(ctx context.Context, fr *faultRun) {
	GinkgoHelper()
	rs := fr.in.Replicas(ctx, fr.dep)
	victim := rs[0]
	before := framework.ScrapeEngines(ctx, fr.dep, rs)
	port := victim.MetricsPort
	if port == 0 {
		port = victim.Port
	}
	By(fmt.Sprintf("making engine Pod %s's /metrics hang", victim.Name))
	lift, err := fr.fi.InjectHTTPFault(ctx, victim.Name, clusters.HTTPFault{Port: port, PathPrefix: "/metrics", Hang: true})
	framework.SkipUnsupported(err, "injecting the metrics hang")
	DeferCleanup(lift)
	l := fr.warm(ctx)
	s := l.Stop()

	iv := fr.in.Interval(config.OpWaitMetrics)
	By(fmt.Sprintf("measuring the split while %s's /metrics hangs: it must fail within %s/wait-metrics (%s)", victim.Name, fr.in.Claim, iv.Timeout.D()))
	start := time.Now()
	failures := InterceptGomegaFailures(func() {
		fr.in.MeasureSplit(ctx, fr.dep, rs, before, s.OK)
	})
	caught := assertions.Interception{Step: "the split measurement", Failures: failures, Took: time.Since(start)}
	lift()
	lifted := time.Now()
	split := fr.in.MeasureSplit(ctx, fr.dep, rs, before, s.OK)
	recovery := time.Since(lifted)
	first := ""
	if len(failures) > 0 {
		first = lineWith(failures[0], victim.Name)
	}
	fr.record(fmt.Sprintf("engine Pod %s's /metrics hung", victim.Name), s, recovery,
		fmt.Sprintf("the suite's split measurement failed after %.2fs (interval %s): %q; after lifting, split %s", caught.Took.Seconds(), iv.Timeout.D(), first, split.Ratio()))
	// The wait's deadline ends the hung scrape; HangSlack covers handing
	// the failure back.
	Expect(caught).To(assertions.HaveFailedWithin(iv.Timeout.D()+framework.HangSlack,
		fmt.Sprintf("%s/wait-metrics %s + %s to hand the failure back", fr.in.Claim, iv.Timeout.D(), framework.HangSlack), victim.Name))
}
