package framework

// What the claims that edit or fault a shared deployment have in common:
// background traffic while it happens, the bound on what may fail, waiting
// for the deployment to be whole again, and putting it back as it was
// created.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
)

const (
	// LoadRPS caps the rate of a disruption's background traffic: a
	// bound's window term is this rate times <claim>/fault-window.
	LoadRPS = 20.0
	// LoadConcurrency is its concurrency unless the claim's row says
	// otherwise: a bound's in-flight term.
	LoadConcurrency = 2
	// LoadBatch is how many requests each run of it sends; progress is read
	// between runs.
	LoadBatch = 10
)

// stamped is one background request and when it was sent.
type stamped struct {
	traffic.Result
	At time.Time
}

// Load is traffic that runs in the background while a deployment is edited
// or faulted: runs of LoadBatch requests at LoadRPS, back to back, until
// stop or <claim>/traffic.
type Load struct {
	concurrency int
	cancel      context.CancelFunc
	quit        chan struct{} // stop: no new run
	done        chan struct{}

	mu      sync.Mutex
	results []stamped
	err     error
}

// LoadSummary is what a load saw: requests answered or failed (a request
// cut by stop counts as neither), and the first failures in words.
type LoadSummary struct {
	Requests, OK, Failed int
	Errors               []string
}

// StartLoad starts background chats to base: prefix-sharing prompts under
// one nonce, streaming and not in turn, as the affinity traffic.
func (in Spec) StartLoad(ctx context.Context, base string, concurrency int) *Load {
	GinkgoHelper()
	if concurrency <= 0 {
		concurrency = LoadConcurrency
	}
	plan := traffic.Plan{
		BaseURL: base, Model: in.Config.Model.Name, Requests: LoadBatch, Concurrency: concurrency, RPS: LoadRPS,
		Mode: traffic.ModeAlternate, MaxTokens: in.Config.Traffic.MaxTokens, RequestTimeout: in.Config.Traffic.RequestTimeout.D(),
		Prompts: traffic.PromptSet{Kind: traffic.PromptsSharedPrefix, PrefixChars: in.Config.Traffic.PrefixChars,
			Nonce: fmt.Sprintf("load-%d", time.Now().UnixNano())},
	}
	Expect(plan.Validate()).To(Succeed())
	By(fmt.Sprintf("starting background traffic to %s (concurrency %d, at most %.0f requests/s)", base, concurrency, LoadRPS))
	lctx, cancel := context.WithTimeout(ctx, in.Interval(config.OpTraffic).Timeout.D())
	l := &Load{concurrency: concurrency, cancel: cancel, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for lctx.Err() == nil {
			select {
			case <-l.quit:
				return
			default:
			}
			rep, err := traffic.Run(lctx, plan)
			if rep != nil {
				l.add(rep)
			}
			if err != nil && lctx.Err() == nil {
				l.fail(err)
				return
			}
		}
	}()
	return l
}

func (l *Load) add(rep *traffic.Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rep.Results {
		if r.Class == traffic.ClassCanceled {
			continue // cut by stop (or never sent): not an outcome of the disruption
		}
		l.results = append(l.results, stamped{Result: r, At: rep.Started.Add(r.StartOffset)})
	}
}

func (l *Load) fail(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// okSince counts the answered requests sent at or after since.
func (l *Load) okSince(since time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.results {
		if r.Class == traffic.ClassOK && !r.At.Before(since) {
			n++
		}
	}
	return n, l.err
}

// FirstAnswer is how long after t the first request sent at or after t
// was answered (0 when none was).
func (l *Load) FirstAnswer(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Duration
	for _, r := range l.results {
		if r.Class == traffic.ClassOK && !r.At.Before(t) {
			if d := r.At.Add(r.Latency).Sub(t); first == 0 || d < first {
				first = d
			}
		}
	}
	return first
}

// WaitOK waits, within <claim>/recover, until n requests sent at or after
// since were answered: traffic flows (again).
func (in Spec) WaitOK(ctx context.Context, l *Load, n int, since time.Time) {
	GinkgoHelper()
	in.Eventually(ctx, config.OpRecover, func() error {
		got, err := l.okSince(since)
		if err != nil {
			return StopTrying("the background traffic stopped").Wrap(err)
		}
		if got < n {
			return fmt.Errorf("%d of %d requests sent since %s answered", got, n, since.Format("15:04:05.000"))
		}
		return nil
	}).Should(Succeed())
}

// Stop ends the load after its current run, so every request sent has
// its outcome (and engine counters can account for all of them), and sums
// it up. <claim>/traffic still cuts a run that never ends.
func (l *Load) Stop() LoadSummary {
	close(l.quit)
	<-l.done
	l.cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	var s LoadSummary
	var start time.Time
	if len(l.results) > 0 {
		start = l.results[0].At
	}
	for _, r := range l.results {
		s.Requests++
		if r.Class == traffic.ClassOK {
			s.OK++
			continue
		}
		s.Failed++
		if len(s.Errors) < 5 {
			s.Errors = append(s.Errors, fmt.Sprintf("at +%.3fs %s status %d: %s", r.At.Sub(start).Seconds(), r.Class, r.Status, firstOf(r.Error, r.ErrorBody)))
		}
	}
	return s
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// Disrupted records what a load saw over action against bound b, and
// returns the entry, with the bound's value for this run, for the caller
// to assert (ExpectWithinBound) after recording the rest.
func (in Spec) Disrupted(action string, s LoadSummary, concurrency int, b fixtures.Bound, recovery time.Duration) report.Disruption {
	GinkgoHelper()
	window := in.Interval(config.OpFaultWindow).Timeout.D()
	d := report.Disruption{Claim: in.Claim, Pair: in.Pair.String(), Action: action, Requests: s.Requests, Failed: s.Failed,
		FailedBound: b.Max(concurrency, LoadRPS, window), Bound: b.Formula(), Errors: s.Errors,
		RecoverySeconds: recovery.Seconds()}
	if recovery > 0 {
		d.RecoveryBoundSeconds = in.Interval(config.OpRecover).Timeout.D().Seconds()
	}
	if b.Window {
		d.Bound += fmt.Sprintf(" (%.0f/s x %s)", LoadRPS, window)
	}
	report.Record(d)
	return d
}

// ExpectWithinBound asserts a disruption's failures against its bound,
// the bound's terms and their derivation (why) in the evidence. A negative
// bound lets every request fail: the bound is on time, asserted by the
// caller.
func ExpectWithinBound(d report.Disruption, why string) {
	GinkgoHelper()
	Expect(assertions.FailedRequests{Action: d.Action, Requests: d.Requests, Failed: d.Failed, First: d.Errors}).
		To(assertions.HaveFailedAtMost(d.FailedBound, d.Bound, why))
}

// Injector is the target's FaultInjector for dep, or a skip with the
// target's reason.
func (in Spec) Injector(dep clusters.Deployment) clusters.FaultInjector {
	GinkgoHelper()
	fi, ok := dep.(clusters.FaultInjector)
	if !ok {
		Skip(fmt.Sprintf("target %s cannot inject faults into a deployment", in.Env.Target))
	}
	return fi
}

// SkipUnsupported skips on a fault the target cannot inject, with its
// reason; any other error fails.
func SkipUnsupported(err error, what string) {
	GinkgoHelper()
	if errors.Is(err, clusters.ErrFaultUnsupported) {
		Skip(err.Error())
	}
	Expect(err).NotTo(HaveOccurred(), what)
}

// Whole waits, within <claim>/recover, for the deployment's readiness gate
// (phase Ready, RouterReady, every replica confirmed behind the router).
func (in Spec) Whole(ctx context.Context, dep clusters.Deployment) {
	GinkgoHelper()
	iv := in.Interval(config.OpRecover)
	wctx, cancel := context.WithTimeout(ctx, iv.Timeout.D())
	defer cancel()
	Expect(dep.WaitReady(wctx, iv.Poll.D())).To(Succeed(), "%s/%s is not whole again within %s/%s", dep.Namespace(), dep.Name(), in.Claim, config.OpRecover)
}

// RestoreAfter puts the shared deployment back as it was created when the
// spec ends, failed or not: the creation-time router args and router
// replicas, then whole again. A claim that mutates a shared deployment
// registers it first thing, so the claims after it find it as created.
func (in Spec) RestoreAfter(ctx context.Context, dep clusters.Deployment) {
	GinkgoHelper()
	obj, err := dep.Object(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(obj.Spec.Router).NotTo(BeNil())
	args := slices.Clone(obj.Spec.Router.ExtraArgs)
	replicas := obj.Spec.Router.Replicas
	DeferCleanup(func(ctx SpecContext) {
		By("putting the deployment back as it was created")
		now, err := dep.Object(ctx)
		Expect(err).NotTo(HaveOccurred())
		if !slices.Equal(now.Spec.Router.ExtraArgs, args) || !equalReplicas(now.Spec.Router.Replicas, replicas) {
			Expect(dep.Update(ctx, func(md *api.ModelDeployment) {
				md.Spec.Router.ExtraArgs = slices.Clone(args)
				md.Spec.Router.Replicas = replicas
			})).To(Succeed())
		}
		in.Whole(ctx, dep)
	}, NodeTimeout(2*in.Interval(config.OpRecover).Timeout.D()))
}

func equalReplicas(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// RouterUIDs are the live router Pods' UIDs.
func RouterUIDs(ctx context.Context, dep clusters.Deployment) []string {
	GinkgoHelper()
	ps, err := dep.RouterState(ctx)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, p := range ps {
		out = append(out, p.UID)
	}
	return out
}

// WaitRouterPods waits, within <claim>/recover, until the deployment has
// exactly n router Pods, all Ready and none of them in old, and returns
// them.
func (in Spec) WaitRouterPods(ctx context.Context, dep clusters.Deployment, n int, old []string) []clusters.RouterPod {
	GinkgoHelper()
	var ps []clusters.RouterPod
	in.Eventually(ctx, config.OpRecover, func(g Gomega, ctx context.Context) {
		var err error
		ps, err = dep.RouterState(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps).To(HaveLen(n), "router Pods")
		for _, p := range ps {
			g.Expect(old).NotTo(ContainElement(p.UID), "router Pod %s is one of before", p.Name)
			g.Expect(p.Ready).To(BeTrue(), "router Pod %s Ready", p.Name)
		}
	}).Should(Succeed())
	return ps
}
