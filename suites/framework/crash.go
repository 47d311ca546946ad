package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/ansi"
)

// RouterCrash is what a router that stops at startup leaves behind.
type RouterCrash struct {
	// Pod is the router Pod whose container terminated.
	Pod clusters.RouterPod
	// Log is the previous container's log as read (ANSI codes and all);
	// Text is the same with the codes stripped.
	Log, Text string
	// RouterReady is the condition as status/reason, e.g. False/NoReadyReplicas.
	RouterReady string
}

// AwaitCrash waits, within the claim's intervals, for a router container
// of dep to exit, for the previous container's log to hold what logged
// accepts, and for RouterReady to read False: a deployment created with
// args its router refuses.
func (in Spec) AwaitCrash(ctx context.Context, dep clusters.Deployment, logged func(log string) error) RouterCrash {
	GinkgoHelper()
	return in.awaitCrash(ctx, dep, logged, nil, true)
}

// awaitCrash waits for a router container to exit, of a Pod outside old
// (the new Pod of an edit) when old is set, for the previous container's
// log to hold what logged accepts, and reads RouterReady, waiting for
// False when routerReadyFalse.
func (in Spec) awaitCrash(ctx context.Context, dep clusters.Deployment, logged func(log string) error, old []string, routerReadyFalse bool) RouterCrash {
	GinkgoHelper()
	var c RouterCrash
	By("waiting for the router container to exit")
	in.Eventually(ctx, config.OpWaitRouterCrash, func(ctx context.Context) error {
		pods, err := dep.RouterState(ctx)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.LastExitCode != nil && !slices.Contains(old, p.UID) {
				c.Pod = p
				return nil
			}
		}
		return fmt.Errorf("no new router container has terminated yet: %+v", pods)
	}).Should(Succeed())

	By("reading the previous container's log")
	in.Eventually(ctx, config.OpWaitLogs, func(ctx context.Context) error {
		logs, err := dep.RouterLogs(ctx, clusters.LogOptions{Previous: true})
		if err != nil {
			return err
		}
		c.Log, c.Text = logs, ansi.Strip(logs)
		return logged(logs)
	}).Should(Succeed())

	if routerReadyFalse {
		By("checking RouterReady is False")
	}
	in.Eventually(ctx, config.OpWaitRouterCrash, func(ctx context.Context) error {
		obj, err := dep.Object(ctx)
		if err != nil {
			return err
		}
		cond := obj.Status.FindCondition(api.ConditionRouterReady)
		if cond == nil {
			return errors.New("RouterReady is not reported yet")
		}
		c.RouterReady = cond.Status + "/" + cond.Reason
		if routerReadyFalse && cond.Status != "False" {
			return fmt.Errorf("RouterReady is %s: %s", c.RouterReady, cond.Message)
		}
		return nil
	}).Should(Succeed())
	return c
}

// Refusal is a router refusing the case's args: on a deployment created
// with them, or on a shared one they were edited into.
type Refusal struct {
	RouterCrash
	// Dep is the deployment the router refuses its args on.
	Dep clusters.Deployment
	// Edited: the args were edited into a running deployment, whose
	// Serving router Pods (their UIDs) kept serving; false: it was created
	// with them and no router Pod was ever Ready.
	Edited  bool
	Serving []string
	// End puts things back at once (edits the args back until the router
	// is Ready again, or deletes the deployment created with them); it
	// runs again, doing nothing, when the spec ends.
	End func(ctx context.Context)
}

// Words says how the args came to be refused, for the verdict line.
func (r Refusal) Words() string {
	if r.Edited {
		return fmt.Sprintf("edited into a running deployment, its router Pod kept serving, RouterReady %s", r.RouterReady)
	}
	return "created with them, RouterReady " + r.RouterReady
}

// Refuse brings the case's router args, which the router refuses at
// startup, onto the case's deployment and waits for the refusal (the
// router container's exit and its previous log as logged accepts). On a
// shared deployment it makes it Ready with the args it has, edits the
// refused ones in, and edits back when End runs or the spec ends, waiting
// until the router is Ready again with its engine Pods the ones before
// (the guard). On a deployment of its own (E2E_ISOLATE, or after the guard
// tripped) it creates one with them, deleted when End runs or the spec ends.
func (in Spec) Refuse(ctx context.Context, logged func(log string) error) Refusal {
	GinkgoHelper()
	in.needsDeployment()
	args := in.Case.Deployment.RouterArgs
	d := in.Deployment
	if !d.perSpec && editGuardTripped(in.Target) {
		own := d.Deployment
		own.RouterArgs, own.Own = slices.Clone(args), true
		d = NewPairDeployment(in.Pair, own, fallbackName(own, in.Pair))
	}
	if d.perSpec {
		dep, err := d.Create(ctx, in.Target, in.Claim)
		Expect(err).NotTo(HaveOccurred(), "creating %s", d.Name)
		crash := in.AwaitCrash(ctx, dep, logged)
		return Refusal{RouterCrash: crash, Dep: dep, End: func(ctx context.Context) { d.Release(ctx, in.Target) }}
	}
	dep := d.Ready(ctx, in.Target, in.Claim, in.currentArgs(ctx))
	from, engines, serving := d.snapshot(ctx)
	By(fmt.Sprintf("editing the refused router args %q into %s (from %q)", args, dep.Name(), from))
	start := time.Now()
	Expect(dep.Update(ctx, func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = slices.Clone(args) })).To(Succeed(),
		"editing spec.router.extraArgs of %s to %q", dep.Name(), args)
	done := false
	end := func(ctx context.Context) {
		GinkgoHelper()
		if done {
			return
		}
		done = true
		// A failed spec's artifacts are taken now, while the router Pod
		// that refused the args is still there to show its exit and log;
		// the edit back removes it (collect runs once per spec).
		d.collect(ctx, in.Target)
		By(fmt.Sprintf("editing the router args of %s back to %q", dep.Name(), from))
		Expect(dep.Update(ctx, func(md *api.ModelDeployment) { md.Spec.Router.ExtraArgs = slices.Clone(from) })).To(Succeed(),
			"editing spec.router.extraArgs of %s back to %q", dep.Name(), from)
		Expect(d.waitReady(ctx, in.Target, in.Claim, config.OpRecover)).To(Succeed(), "%s after editing its router args back to %q", dep.Name(), from)
		d.checkEngines(ctx, in.Target, in.Claim, engines, RouterEdit{From: from, To: args, Refused: true, OldRouters: serving,
			NewRouters: RouterUIDs(ctx, dep), Seconds: time.Since(start).Seconds()})
	}
	DeferCleanup(end, NodeTimeout(2*in.Interval(config.OpRecover).Timeout.D()))
	crash := in.awaitCrash(ctx, dep, logged, serving, false)
	return Refusal{RouterCrash: crash, Dep: dep, Edited: true, Serving: serving, End: end}
}

// currentArgs are the router args of the case's shared deployment as they
// stand (nil before it is created: then it is created with the ones its
// plan names).
func (in Spec) currentArgs(ctx context.Context) []string {
	GinkgoHelper()
	d := in.Deployment
	if !d.created {
		return d.RouterArgs
	}
	obj, err := d.dep.Object(ctx)
	Expect(err).NotTo(HaveOccurred())
	return obj.Spec.Router.ExtraArgs
}

// ExpectRefused checks, for the claim's consistently interval, that the
// router never starts with the refused args: a deployment created with
// them never becomes Ready (ExpectNeverReady); on one they were edited
// into, the new router Pod never becomes Ready while the Pods that served
// before the edit stay Ready and RouterReady True, as a rolling update
// keeps them (docs/operator.md#router-rollout-and-the-router-service).
func (in Spec) ExpectRefused(ctx context.Context, r Refusal) {
	GinkgoHelper()
	if !r.Edited {
		in.ExpectNeverReady(ctx, r.Dep)
		return
	}
	By("checking the new router Pod never becomes Ready while the previous one keeps serving")
	in.Consistently(ctx, config.OpConsistently, func(ctx context.Context) (assertions.DeploymentState, error) {
		return ReadState(ctx, r.Dep)
	}).Should(assertions.HaveRefusedRollout(r.Pod.UID, r.Serving))
}

// ReadState reads what says whether dep is Ready: its phase, its
// RouterReady condition and its router Pods.
func ReadState(ctx context.Context, dep clusters.Deployment) (assertions.DeploymentState, error) {
	obj, err := dep.Object(ctx)
	if err != nil {
		return assertions.DeploymentState{}, err
	}
	st := assertions.DeploymentState{Name: dep.Name(), Phase: obj.Status.Phase}
	if c := obj.Status.FindCondition(api.ConditionRouterReady); c != nil {
		st.RouterReady = c.Status
		st.RouterReadyReason = c.Reason
	}
	st.RouterPods, err = dep.RouterState(ctx)
	return st, err
}

// ExpectNeverReady checks, for the claim's consistently interval, that dep
// stays out of phase Ready, RouterReady never turns True and no router Pod
// is Ready.
func (in Spec) ExpectNeverReady(ctx context.Context, dep clusters.Deployment) {
	GinkgoHelper()
	By("checking the deployment never becomes Ready")
	in.Consistently(ctx, config.OpConsistently, func(ctx context.Context) (assertions.DeploymentState, error) {
		return ReadState(ctx, dep)
	}).Should(assertions.NotBeReady())
}
