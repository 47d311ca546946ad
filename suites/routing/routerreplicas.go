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
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimRouterReplicas: with spec.router.replicas above 1 behind the
// router Service, a kept-alive client stays on one router Pod, new
// connections spread over all of them, and each router Pod keeps its own
// routing state.
const ClaimRouterReplicas = "routerreplicas"

// RouterReplicasRow is what routerreplicas' rows state.
type RouterReplicasRow struct {
	RouterReplicas RouterReplicas `json:"routerReplicas"`
}

// RouterReplicas is a deployment scaled to Replicas router Pods behind the
// router Service. What each router Pod's own state makes of the spread is
// the row's derivation.
type RouterReplicas struct {
	Replicas int32 `json:"replicas"`
	// RequestsSeries counts a router Pod's client requests (read per Pod).
	RequestsSeries string `json:"requestsSeries"`
	// KeepAlive is the engine split of serial traffic on one kept-alive
	// connection (it stays on one router Pod).
	KeepAlive fixtures.Split `json:"keepAlive"`
}

// Check implements yamlbind.Checker.
func (r RouterReplicas) Check() []string {
	if r.Replicas < 2 {
		return []string{"replicas must be above 1"}
	}
	return nil
}

var _ = framework.Add(Registry, framework.Claim[RouterReplicasRow]{
	Name:  ClaimRouterReplicas,
	Title: "Router replicas behind the router Service",
	Asserts: "`router.replicas: 2` behind the router Service: a kept-alive client stays on one router Pod; a connection " +
		"per request spreads over both within a binomial bound; each router Pod keeps its own requests on one replica " +
		"(llm-d + vLLM: recorded, its picks fall to KV usage and random ties); split and per-router-Pod counts reported",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Mutates:     true,
	Specs: func(input func() framework.Input[RouterReplicasRow]) {
		RouterReplicasSpec(func() RouterReplicasSpecInput { return RouterReplicasSpecInput{Input: input()} })
	},
})

// RouterReplicasSpecInput is the input of RouterReplicasSpec.
type RouterReplicasSpecInput struct {
	framework.Input[RouterReplicasRow]
	// Requests overrides traffic.requests when > 0.
	Requests int
}

// Check implements framework.SpecInput.
func (in RouterReplicasSpecInput) Check() error { return checkRequests(in.Spec, in.Requests) }

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
	framework.CheckInput("RouterReplicasSpec", input)
	var in RouterReplicasSpecInput
	BeforeEach(func() {
		in = input()
		in.Begin()
		in.Requests = in.RequestsOr(in.Requests)
	})

	It("spreads connections over the router Pods and reports how affinity holds", func(ctx SpecContext) {
		rr := in.Expect.RouterReplicas
		dep := in.Ready(ctx)
		in.RestoreAfter(ctx, dep)
		By(fmt.Sprintf("scaling the router to %d replicas", rr.Replicas))
		Expect(dep.Update(ctx, func(md *api.ModelDeployment) { md.Spec.Router.Replicas = api.Ptr(rr.Replicas) })).To(Succeed())
		pods := in.WaitRouterPods(ctx, dep, int(rr.Replicas), nil)
		in.Whole(ctx, dep)
		rs := in.Replicas(ctx, dep)

		kept := in.batch(ctx, dep, rs, pods, rr, false)
		each := in.batch(ctx, dep, rs, pods, rr, true)

		lo, hi, derivation := spreadBound(in.Requests, len(pods))
		in.Record(in.Row.Summary,
			fmt.Sprintf("kept-alive: router Pods %s, engines %s; a connection each: router Pods %s (bound %d..%d each), engines %s, %.0f%% on the busiest replica",
				kept.podWords(), kept.split.Ratio(), each.podWords(), lo, hi, each.split.Ratio(), 100*each.majority()))

		Expect(kept.podSplit(rr.RequestsSeries)).To(assertions.BeAllOnOneReplica(), "a kept-alive client's requests all on one router Pod")
		if rr.KeepAlive.Shape != fixtures.ShapeRecorded {
			framework.ExpectShape(kept.split, rr.KeepAlive, in.Requests)
		}
		Expect(each.podSplit(rr.RequestsSeries)).To(assertions.HaveEachCountWithin(lo, hi, derivation), "a connection per request over the router Pods")
		if rr.KeepAlive.Shape == fixtures.ShapeOneReplica {
			Expect(each.split).To(assertions.BeMadeOfWholeGroups(each.podCounts()...),
				"each router Pod keeps its own requests on one replica (%s), so the engine split is made of whole router Pods' counts %s",
				in.Row.Derivation, each.podWords())
		}
	})
}

// spreadBound is the interval each router Pod's count of n connections
// must lie in, and its derivation: connections go to a Ready Pod uniformly
// at random (kube-proxy), so a Pod's count is Bin(n, 1/pods), and
// spreadSigmas standard deviations either side fail a correct run about
// once in 1.7 million.
func spreadBound(n, pods int) (lo, hi int, derivation string) {
	share := 1 / float64(pods)
	mean := float64(n) * share
	slack := spreadSigmas * math.Sqrt(float64(n)*share*(1-share))
	lo, hi = int(math.Ceil(mean-slack)), int(math.Floor(mean+slack))
	return lo, hi, fmt.Sprintf("Bin(%d, 1/%d): mean %.0f ± %d standard deviations (%.1f each)", n, pods, mean, spreadSigmas, slack/spreadSigmas)
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

// podSplit is the batch's requests per router Pod, as the router Pods
// counted them.
func (b podBatch) podSplit(series string) split.Split {
	counts := map[string]int{}
	for _, p := range b.pods {
		counts[p] = int(b.perPod[p])
	}
	return split.New(series+" per router Pod", b.pods, counts)
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
	pods []clusters.RouterPod, rr RouterReplicas, fresh bool) podBatch {
	GinkgoHelper()
	routerBefore := framework.RouterMetrics(ctx, dep)
	before := framework.ScrapeEngines(ctx, dep, rs)
	plan := in.ChatPlan(ctx, dep, in.Requests)
	plan.NewConnectionPerRequest = fresh
	rep := in.Send(ctx, plan)
	s := in.MeasureSplit(ctx, dep, rs, before, in.Requests)
	b := podBatch{split: s, perPod: map[string]float64{}}
	for _, p := range pods {
		b.pods = append(b.pods, p.Name)
	}
	sort.Strings(b.pods)
	// A router Pod counts a request as it ends: wait until they add up.
	in.Eventually(ctx, config.OpWaitMetrics, func(g Gomega, ctx context.Context) {
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
	in.RecordSplit(title, s, rs, in.Requests, rep.Summary.Failed, "recorded with two router Pods")
	e := report.RouterPods{Claim: in.Claim, Pair: in.Pair.String(), Title: title}
	for _, p := range b.pods {
		e.Pods = append(e.Pods, report.ReplicaCount{Replica: p, Count: b.perPod[p]})
	}
	for _, r := range rs {
		e.Replicas = append(e.Replicas, report.ReplicaCount{Replica: r.Name, Address: r.URL(), Count: float64(s.Count(r.Name))})
	}
	report.Record(e)
	return b
}
