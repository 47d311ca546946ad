package framework

import (
	"context"
	"errors"
	"fmt"

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
// accepts, and for RouterReady to read False.
func (in Spec) AwaitCrash(ctx context.Context, dep clusters.Deployment, logged func(log string) error) RouterCrash {
	GinkgoHelper()
	var c RouterCrash
	By("waiting for the router container to exit")
	in.Eventually(ctx, config.OpWaitRouterCrash, func(ctx context.Context) error {
		pods, err := dep.RouterState(ctx)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.LastExitCode != nil {
				c.Pod = p
				return nil
			}
		}
		return fmt.Errorf("no router container has terminated yet: %+v", pods)
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

	By("checking RouterReady is False")
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
		if cond.Status != "False" {
			return fmt.Errorf("RouterReady is %s: %s", c.RouterReady, cond.Message)
		}
		return nil
	}).Should(Succeed())
	return c
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
