package routing

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimDeleteRouter: the router Pod deleted while traffic runs (kubectl
// delete pod, clusters.FaultInjector.DeleteRouterPod). Its ReplicaSet
// replaces it; failed requests stay within the row's bound, a new router
// Pod (new UID) is Ready behind the Service within <claim>/recover, and the
// engine Pods are untouched.
const ClaimDeleteRouter = "deleterouter"

var _ = framework.Add(Registry, faultClaim(ClaimDeleteRouter, "The router Pod deleted mid-traffic",
	"the router Pod deleted mid-traffic: failed requests within the bound, a new router Pod Ready behind the Service "+
		"within `deleterouter/recover`, engines untouched",
	deleteRouter))

// deleteRouter deletes the router Pod under traffic and waits for its
// replacement.
func deleteRouter(ctx context.Context, fr *faultRun) {
	GinkgoHelper()
	ps, err := fr.dep.RouterState(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(ps).NotTo(BeEmpty())
	old := framework.RouterUIDs(ctx, fr.dep)
	l := fr.warm(ctx)
	By("deleting router Pod " + ps[0].Name + " while traffic runs")
	t0 := time.Now()
	Expect(fr.fi.DeleteRouterPod(ctx, ps[0].Name)).To(Succeed())
	pods := fr.in.WaitRouterPods(ctx, fr.dep, len(ps), old)
	fr.in.Whole(ctx, fr.dep)
	recovery := time.Since(t0)
	fr.in.WaitOK(ctx, l, framework.LoadBatch, time.Now())
	s := l.Stop()
	fr.record(fmt.Sprintf("deleted router Pod %s, replaced by %s", ps[0].Name, pods[0].Name), s, recovery, "")
	fr.expectEngines(ctx, "deleting the router Pod must not touch the engines")
}
