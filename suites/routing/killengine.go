package routing

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimKillEngine: the busiest engine Pod killed with a zero grace period
// while traffic runs (clusters.FaultInjector.KillEnginePod). Failed
// requests stay within the row's bound, the operator starts a replacement
// (new name) that is Ready and confirmed behind the router within
// <claim>/recover, and the surviving replica is untouched.
const ClaimKillEngine = "killengine"

var _ = framework.Add(Registry, func() framework.Claim[FaultRow] {
	c := faultClaim(ClaimKillEngine, "An engine Pod killed mid-traffic",
		"the busiest engine Pod killed (zero grace period) mid-traffic: failed requests within the bound, a replacement "+
			"Pod Ready and confirmed within `killengine/recover`, the survivor untouched",
		killEngine)
	// The replacement of the killed Pod is one engine Pod more, one more
	// model load on a GPU.
	c.Cases = func(row fixtures.Row, _ FaultRow) []framework.Case {
		return []framework.Case{{Deployment: framework.Shared(row.RouterArgs), ExtraEnginePods: 1}}
	}
	return c
}())

// killEngine kills the replica the traffic goes to and waits for its
// replacement.
func killEngine(ctx context.Context, fr *faultRun) {
	GinkgoHelper()
	rs := fr.in.Replicas(ctx, fr.dep)
	before := framework.ScrapeEngines(ctx, fr.dep, rs)
	l := fr.warm(ctx)
	victim := fr.busiest(ctx, rs, before)
	// The router watched an engine Pod die: what its discovery and its
	// policies kept of that is its own (a router that watched this claim
	// counted 12 retries in the next claim on the deployment where a fresh
	// one counts 8: docs/routers-from-source.md#discovery-without-the-operators-patches).
	// The claims after this one on the shared deployment must not inherit
	// it, so its router Pods are replaced, as a deployment created anew has
	// a router that never saw the Pod (DeferCleanup runs this before
	// RestoreAfter's wait for the deployment whole again).
	DeferCleanup(func(ctx SpecContext) {
		By("replacing the router Pods, which saw an engine Pod die, so the next claims get a router as created")
		ps, err := fr.dep.RouterState(ctx)
		Expect(err).NotTo(HaveOccurred())
		var old []string
		for _, p := range ps {
			old = append(old, p.UID)
			Expect(fr.fi.DeleteRouterPod(ctx, p.Name)).To(Succeed())
		}
		fr.in.WaitRouterPods(ctx, fr.dep, len(ps), old)
	}, NodeTimeout(2*fr.in.Interval(config.OpRecover).Timeout.D()))
	By(fmt.Sprintf("killing engine Pod %s (zero grace period) while traffic runs", victim.Name))
	t0 := time.Now()
	Expect(fr.fi.KillEnginePod(ctx, victim)).To(Succeed())
	fr.in.Whole(ctx, fr.dep)
	var now []clusters.Replica
	fr.in.Eventually(ctx, config.OpRecover, func(g Gomega, ctx context.Context) {
		var err error
		now, err = fr.dep.Replicas(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now).To(HaveLen(len(rs)))
		g.Expect(clusters.ReplicaUIDs(now)).NotTo(ContainElement(victim.UID), "the killed Pod is gone")
	}).Should(Succeed())
	fr.in.Whole(ctx, fr.dep)
	recovery := time.Since(t0)
	fr.in.WaitOK(ctx, l, framework.LoadBatch, time.Now())
	s := l.Stop()
	var replacement string
	for _, r := range now {
		if _, had := fr.engines[r.Name]; !had {
			replacement = r.Name
		}
	}
	fr.record(fmt.Sprintf("killed engine Pod %s, replaced by %s", victim.Name, replacement), s, recovery, "")
	fr.expectEngines(ctx, "the killed Pod replaced under a new name, the survivor untouched", victim.Name)
}
