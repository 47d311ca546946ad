package routing

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

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

// ClaimRouterReplicas: spec.router.replicas above 1, behind the router
// Service.
const ClaimRouterReplicas = "routerreplicas"

var _ = register(Claim{
	Name:        ClaimRouterReplicas,
	Title:       "Router replicas behind the router Service",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Mutates:     true,
	Require: func(e fixtures.Expectation) []string {
		return need(nil, e.RouterReplicas != nil, "routerreplicas needs routerReplicas")
	},
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		RouterReplicasSpec(func() RouterReplicasSpecInput { return RouterReplicasSpecInput{Input: input()} })
	},
})

// RouterReplicasSpecInput is the input of RouterReplicasSpec.
type RouterReplicasSpecInput struct {
	Input
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// spreadSigmas is how far from an even share a router Pod's count may be:
// connections spread uniformly at random (kube-proxy), so a Pod's count is
// binomial; 5 standard deviations fail a correct run about once in 1.7
// million.
const spreadSigmas = 5

// RouterReplicasSpec scales the shared deployment's router to the row's
// replicas and sends the affinity traffic twice through the router
// Service: on one kept-alive connection (it stays on one router Pod, so the
// split is as with one router), then with a connection per request (each
// draws a router Pod at random). It reports the split and each router
// Pod's own request count, and asserts: the kept-alive batch on one Pod;
// the spread within a binomial bound; and, where one router keeps a shared
// prefix on one replica, that each router Pod still does so for its own
// requests, so the engine split is made of whole router Pods' counts.
func RouterReplicasSpec(input func() RouterReplicasSpecInput) {
	var (
		in  RouterReplicasSpecInput
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("RouterReplicasSpec", ClaimRouterReplicas)
		if in.Requests == 0 {
			in.Requests = in.Config.Traffic.Requests
		}
	})

	It("spreads connections over the router Pods and reports how affinity holds", func(ctx SpecContext) {
		rr := exp.RouterReplicas
		dep := in.ready(ctx, ClaimRouterReplicas, exp.RouterArgs)
		in.restoreAfter(ctx, ClaimRouterReplicas, dep)
		By(fmt.Sprintf("scaling the router to %d replicas", rr.Replicas))
		Expect(dep.Update(ctx, func(md *api.ModelDeployment) { md.Spec.Router.Replicas = api.Ptr(rr.Replicas) })).To(Succeed())
		pods := in.waitRouterPods(ctx, ClaimRouterReplicas, dep, int(rr.Replicas), nil)
		in.whole(ctx, ClaimRouterReplicas, dep)
		rs := in.replicas(ctx, dep)

		kept := in.batch(ctx, dep, rs, pods, rr, false)
		each := in.batch(ctx, dep, rs, pods, rr, true)

		n := float64(in.Requests)
		share := 1 / float64(len(pods))
		slack := spreadSigmas * math.Sqrt(n*share*(1-share))
		lo, hi := n*share-slack, n*share+slack
		report.Record(report.Claim{Claim: ClaimRouterReplicas, Pair: in.Pair.String(), Expected: exp.Summary,
			Measured: fmt.Sprintf("kept-alive: router Pods %s, engines %s; a connection each: router Pods %s (bound %.0f..%.0f each), engines %s, %.0f%% on the busiest replica",
				kept.podWords(), kept.split.Ratio(), each.podWords(), lo, hi, each.split.Ratio(), 100*each.majority())})

		Expect(kept.podCounts()).To(ContainElement(in.Requests), "a kept-alive client's requests all on one router Pod: %s", kept.podWords())
		if rr.KeepAlive.Shape != fixtures.ShapeRecorded {
			expectShape(kept.split, *rr.KeepAlive, in.Requests)
		}
		for pod, c := range each.perPod {
			Expect(c).To(BeNumerically(">=", lo), "router Pod %s got %v of %d connections; uniform spread allows %.0f..%.0f", pod, c, in.Requests, lo, hi)
			Expect(c).To(BeNumerically("<=", hi), "router Pod %s got %v of %d connections; uniform spread allows %.0f..%.0f", pod, c, in.Requests, lo, hi)
		}
		if rr.KeepAlive.Shape == fixtures.ShapeOneReplica {
			Expect(each.split).To(assertions.BeMadeOfWholeGroups(each.podCounts()...),
				"each router Pod keeps its own requests on one replica (%s), so the engine split is made of whole router Pods' counts %s",
				exp.Derivation, each.podWords())
		}
	})
}

// podBatch is one batch of requests through the router Service and where
// it went.
type podBatch struct {
	split  split.Split
	perPod map[string]float64
	pods   []string
}

func (b podBatch) podCounts() []int {
	var out []int
	for _, p := range b.pods {
		out = append(out, int(b.perPod[p]))
	}
	return out
}

func (b podBatch) podWords() string {
	var parts []string
	for _, p := range b.pods {
		parts = append(parts, metrics.FormatValue(b.perPod[p]))
	}
	return strings.Join(parts, "/")
}

// majority is the busiest replica's share of the batch.
func (b podBatch) majority() float64 {
	var total, top float64
	for _, r := range b.split.Replicas {
		c := float64(b.split.Count(r))
		total += c
		top = max(top, c)
	}
	if total == 0 {
		return 0
	}
	return top / total
}

// batch sends the affinity traffic through the Service (a connection per
// request when fresh) and reads the engine split and each router Pod's
// request counter over it.
func (in RouterReplicasSpecInput) batch(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica,
	pods []clusters.RouterPod, rr *fixtures.RouterReplicas, fresh bool) podBatch {
	GinkgoHelper()
	routerBefore := routerMetrics(ctx, dep)
	before := scrapeEngines(ctx, dep, rs)
	plan := in.plan(ctx, dep, in.Requests)
	plan.NewConnectionPerRequest = fresh
	rep := in.send(ctx, ClaimRouterReplicas, plan)
	s := in.measureSplit(ctx, ClaimRouterReplicas, dep, in.Pair, rs, before, in.Requests)
	b := podBatch{split: s, perPod: map[string]float64{}}
	for _, p := range pods {
		b.pods = append(b.pods, p.Name)
	}
	sort.Strings(b.pods)
	// A router Pod counts a request as it ends: wait until they add up.
	in.eventually(ctx, ClaimRouterReplicas, config.OpWaitMetrics, func(g Gomega, ctx context.Context) {
		after, err := dep.RouterMetrics(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		per, err := metrics.DeltaBy(routerBefore, after, rr.RequestsSeries, metrics.SourceLabel)
		g.Expect(err).NotTo(HaveOccurred())
		var total float64
		for _, v := range per {
			total += v
		}
		g.Expect(total).To(BeNumerically("==", in.Requests), "%s over the router Pods %v", rr.RequestsSeries, per)
		b.perPod = per
	}).Should(Succeed())
	how := "on one kept-alive connection"
	if fresh {
		how = "a connection each"
	}
	title := fmt.Sprintf("%d serial chats, %s, %d router Pods", in.Requests, how, len(pods))
	report.Record(splitEntry(ClaimRouterReplicas, in.Pair, title, s, rs, in.Requests, rep.Summary.Failed, "recorded with two router Pods"))
	e := report.RouterPods{Claim: ClaimRouterReplicas, Pair: in.Pair.String(), Title: title}
	for _, p := range b.pods {
		e.Pods = append(e.Pods, report.ReplicaCount{Replica: p, Count: b.perPod[p]})
	}
	for _, r := range rs {
		e.Replicas = append(e.Replicas, report.ReplicaCount{Replica: r.Name, Address: r.URL(), Count: float64(s.Count(r.Name))})
	}
	report.Record(e)
	return b
}
