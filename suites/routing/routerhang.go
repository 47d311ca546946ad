package routing

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimRouterHang: the router Pod accepts connections and never answers
// (it stays Ready: its probe is TCP). Nothing routes around it, so what is
// bounded is the suite: its traffic fails within <claim>/traffic saying
// so instead of hanging the run, and once lifted, requests succeed.
const ClaimRouterHang = "routerhang"

var _ = framework.Add(Registry, faultClaim(ClaimRouterHang, "A router that accepts connections and never answers",
	"the router accepts connections and never answers: the suite's traffic fails within `routerhang/traffic` saying "+
		"so; after lifting, requests succeed",
	routerHang))

// routerHang makes every router Pod hang on its API port, sends traffic
// into it, lifts the hang and sends again.
func routerHang(ctx context.Context, fr *faultRun) {
	GinkgoHelper()
	ps, err := fr.dep.RouterState(ctx)
	Expect(err).NotTo(HaveOccurred())
	var lifts []func()
	for _, p := range ps {
		lift, err := fr.fi.InjectHTTPFault(ctx, p.Name, clusters.HTTPFault{Port: api.RouterHTTPPort, Hang: true})
		framework.SkipUnsupported(err, "injecting the router hang")
		DeferCleanup(lift)
		lifts = append(lifts, lift)
	}
	iv := fr.in.Interval(config.OpTraffic)
	const sent = 4
	By(fmt.Sprintf("sending %d requests to a router that never answers: the run must fail within %s/traffic (%s)", sent, fr.in.Claim, iv.Timeout.D()))
	start := time.Now()
	failures := InterceptGomegaFailures(func() {
		fr.in.Send(ctx, fr.in.ChatPlan(ctx, fr.dep, sent))
	})
	caught := assertions.Interception{Step: "the traffic to the hung router", Failures: failures, Took: time.Since(start)}
	for _, lift := range lifts {
		lift()
	}
	lifted := time.Now()
	rep := fr.in.Send(ctx, fr.in.ChatPlan(ctx, fr.dep, sent))
	recovery := time.Since(lifted)
	first := ""
	if len(failures) > 0 {
		first = lineWith(failures[0], "did not finish")
	}
	fr.record(fmt.Sprintf("router Pod(s) accepted and never answered for %.2fs", caught.Took.Seconds()),
		framework.LoadSummary{Requests: sent, Failed: sent}, recovery,
		fmt.Sprintf("the traffic failed after %.2fs (interval %s): %q; after lifting %d of %d answered", caught.Took.Seconds(), iv.Timeout.D(), first, rep.Summary.OK, sent))
	Expect(caught).To(assertions.HaveFailedWithin(iv.Timeout.D()+time.Second,
		fmt.Sprintf("%s/traffic %s + 1s to cancel the requests in flight", fr.in.Claim, iv.Timeout.D()),
		fmt.Sprintf("did not finish within %s/traffic", fr.in.Claim)))
}
