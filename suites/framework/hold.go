package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/traffic"
)

// InFlightGauge is a router's per-worker in-flight gauge as a row names it
// (cache_aware only): what Holds reads to confirm each dispatch, so it
// needs its worker label.
type InFlightGauge fixtures.Series

// Check implements yamlbind.Checker.
func (g InFlightGauge) Check() []string {
	out := fixtures.Series(g).Check()
	if g.WorkerLabel == "" {
		out = append(out, "the in-flight gauge needs its workerLabel")
	}
	return out
}

// Holds keeps long requests in flight on a cache_aware router, one after
// another: each is sent in the background and counts as dispatched once
// the router's own in-flight gauge (the row's inFlight series, per worker)
// has risen by one, so the router has picked its worker, and counted its
// load, before the next is sent. That makes the loads every pick sees
// exactly known, whatever the machine's speed, which is what lets the
// threshold and routing-text claims predict single picks. Under any policy
// but cache_aware the routers keep no load and the gauge never moves
// (docs/routers.md#candidates-order-and-load).
type Holds struct {
	in    Spec
	dep   clusters.Deployment
	gauge InFlightGauge
	// replica maps a worker label value to its replica name.
	replica map[string]string
	// want is the in-flight count per replica the router should show.
	want map[string]int
	// Order is the replica of each held request, in sending order.
	Order []string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	runs   []*traffic.Report
	errs   []error
}

// holdTokens is max_tokens of a held request: half the context, with
// ignore_eos so that a real model generates all of them. That is seconds
// of decoding on a GPU and, at the sim's engineITL, long enough for every
// dispatch to be confirmed before the first ends.
func (t Target) holdTokens() int { return max(t.Config.Model.ContextLength/2, 64) }

// holdPlan turns plan into the one long request of a hold: request 0 of
// plan (prompt number plan.FirstIndex), not streamed.
func (t Target) holdPlan(plan traffic.Plan) traffic.Plan {
	plan.Requests, plan.Concurrency, plan.Mode = 1, 1, traffic.ModeNonStream
	plan.MaxTokens = t.holdTokens()
	extra := maps.Clone(plan.ExtraBody)
	if extra == nil {
		extra = map[string]any{}
	}
	extra["ignore_eos"] = true
	plan.ExtraBody = extra
	return plan
}

// StartHolds waits until the router shows nothing in flight (what earlier
// traffic left has drained) and returns an empty set of holds. Whatever is
// still held when the spec ends is cancelled and waited for.
func (in Spec) StartHolds(ctx context.Context, dep clusters.Deployment, rs []clusters.Replica, gauge InFlightGauge) *Holds {
	GinkgoHelper()
	h := &Holds{in: in, dep: dep, gauge: gauge, replica: map[string]string{}, want: map[string]int{}}
	for _, r := range rs {
		h.replica[WorkerValues([]clusters.Replica{r}, gauge.WorkerValue)[0]] = r.Name
	}
	// Held requests outlive the step that sends them, not the spec.
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	DeferCleanup(func() { h.cancel(); h.wg.Wait() })
	By(fmt.Sprintf("waiting until the router's %s reads 0 on every worker", gauge.Name))
	h.ExpectInFlight(ctx)
	return h
}

// inFlight reads the gauge of every replica (0 for a worker without a
// series: the router sets it on the first load change).
func (h *Holds) inFlight(ctx context.Context) (map[string]int, error) {
	s, err := h.dep.RouterMetrics(ctx)
	if err != nil {
		return nil, err
	}
	by, err := s.SumBy(h.gauge.Name, h.gauge.WorkerLabel)
	if err != nil && !metrics.IsNoSeries(err) {
		return nil, err
	}
	out := map[string]int{}
	for _, name := range h.replica {
		out[name] = 0
	}
	for v, n := range by {
		name, ok := h.replica[v]
		if !ok {
			return nil, fmt.Errorf("%s{%s=%q} names no replica (replicas: %v)", h.gauge.Name, h.gauge.WorkerLabel, v, slices.Sorted(maps.Keys(h.replica)))
		}
		out[name] = int(n)
	}
	return out, nil
}

// ExpectInFlight waits until the gauge reads exactly what the holds
// confirmed, and returns the reading.
func (h *Holds) ExpectInFlight(ctx context.Context) map[string]int {
	GinkgoHelper()
	var got map[string]int
	h.in.Eventually(ctx, config.OpWaitMetrics, func(ctx context.Context) error {
		var err error
		if got, err = h.inFlight(ctx); err != nil {
			return err
		}
		if err := assertions.CheckInFlight(h.gauge.Name, got, h.want); err != nil {
			return err
		}
		return h.failed()
	}).Should(Succeed())
	return got
}

// failed is the first held request that ended badly, if any: a held
// request that ended at all before release means the hold was too short.
func (h *Holds) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) > 0 {
		return StopTrying(h.errs[0].Error())
	}
	return nil
}

// Hold sends plan's request in the background and waits until the router
// counts it in flight; it returns the replica the router picked.
func (h *Holds) Hold(ctx context.Context, plan traffic.Plan) string {
	GinkgoHelper()
	plan = h.in.holdPlan(plan)
	before := maps.Clone(h.want)
	h.wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer h.wg.Done()
		rep, err := traffic.Run(h.ctx, plan)
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case err != nil:
			h.errs = append(h.errs, err)
		case rep.Summary.Failed > 0:
			r := rep.Results[0]
			h.errs = append(h.errs, fmt.Errorf("held request failed: %s status %d: %s %s", r.Class, r.Status, r.Error, r.ErrorBody))
		}
		h.runs = append(h.runs, rep)
	}()
	By(fmt.Sprintf("holding request %d in flight (%d tokens) until the router's %s counts it", len(h.Order)+1, plan.MaxTokens, h.gauge.Name))
	var picked string
	h.in.Eventually(ctx, config.OpWaitMetrics, func(ctx context.Context) error {
		got, err := h.inFlight(ctx)
		if err != nil {
			return err
		}
		if err := h.failed(); err != nil {
			return err
		}
		var rose []string
		for r, n := range got {
			switch {
			case n == before[r]+1:
				rose = append(rose, r)
			case n != before[r]:
				return StopTrying(fmt.Sprintf("the router's %s reads %v after sending held request %d; before it read %v: a held request ended early, hold longer (model.contextLength sets max_tokens) or slow the engines",
					h.gauge.Name, got, len(h.Order)+1, before))
			}
		}
		if len(rose) != 1 {
			return fmt.Errorf("the router's %s reads %v, waiting for one worker to rise from %v", h.gauge.Name, got, before)
		}
		picked = rose[0]
		return nil
	}).Should(Succeed())
	h.want[picked]++
	h.Order = append(h.Order, picked)
	return picked
}

// Release waits for every held request to finish and fails on any that
// did not succeed.
func (h *Holds) Release() {
	GinkgoHelper()
	By(fmt.Sprintf("waiting for the %d held requests to finish", len(h.Order)))
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	Expect(h.errs).To(BeEmpty(), "held requests")
	h.want = map[string]int{}
	h.Order = nil
}
