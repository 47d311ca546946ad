package routing

import (
	"context"
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
)

// routerCrash is what a router that stops at startup leaves behind.
type routerCrash struct {
	// Pod is the router Pod whose container terminated.
	Pod clusters.RouterPod
	// Log is the previous container's log as read (ANSI codes and all);
	// Text is the same with the codes stripped.
	Log, Text string
	// RouterReady is the condition as status/reason, e.g. False/NoReadyReplicas.
	RouterReady string
}

// awaitCrash waits, within claim's intervals, for a router container of dep
// to exit, for the previous container's log to hold what logged accepts,
// and for RouterReady to read False.
func (t Target) awaitCrash(ctx context.Context, claim string, dep clusters.Deployment, logged func(log string) error) routerCrash {
	GinkgoHelper()
	var c routerCrash
	By("waiting for the router container to exit")
	t.eventually(ctx, claim, config.OpWaitRouterCrash, func(ctx context.Context) error {
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
	t.eventually(ctx, claim, config.OpWaitLogs, func(ctx context.Context) error {
		logs, err := dep.RouterLogs(ctx, clusters.LogOptions{Previous: true})
		if err != nil {
			return err
		}
		c.Log, c.Text = logs, routerlog.StripANSI(logs)
		return logged(logs)
	}).Should(Succeed())

	By("checking RouterReady is False")
	t.eventually(ctx, claim, config.OpWaitRouterCrash, func(ctx context.Context) error {
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

// expectNeverReady checks, for claim's consistently interval, that dep
// stays out of phase Ready, RouterReady never turns True and no router Pod
// is Ready.
func (t Target) expectNeverReady(ctx context.Context, claim string, dep clusters.Deployment) {
	GinkgoHelper()
	By("checking the deployment never becomes Ready")
	t.consistently(ctx, claim, config.OpConsistently, func(ctx context.Context) error {
		obj, err := dep.Object(ctx)
		if err != nil {
			return err
		}
		if obj.Status.Phase == api.PhaseReady {
			return errors.New("phase is Ready")
		}
		if c := obj.Status.FindCondition(api.ConditionRouterReady); c != nil && c.Status == "True" {
			return errors.New("RouterReady is True")
		}
		pods, err := dep.RouterState(ctx)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.Ready {
				return fmt.Errorf("router Pod %s is Ready", p.Name)
			}
		}
		return nil
	}).Should(Succeed())
}
