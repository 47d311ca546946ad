package framework

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/report"
)

// WaitBanner waits for the router's startup banner in its current logs.
func (in Spec) WaitBanner(ctx context.Context, dep clusters.Deployment) routerlog.Banner {
	GinkgoHelper()
	By("reading the router's startup banner")
	var b routerlog.Banner
	in.Eventually(ctx, config.OpWaitLogs, func(ctx context.Context) error {
		logs, err := dep.RouterLogs(ctx, clusters.LogOptions{})
		if err != nil {
			return err
		}
		b, err = routerlog.FindBanner(logs)
		return err
	}).Should(Succeed())
	return b
}

// RecordBanner records the banner found beside the one expected.
func (in Spec) RecordBanner(expected string, b routerlog.Banner) {
	report.Record(report.Banner{Claim: in.Claim, Pair: in.Pair.String(), Expected: expected, Line: b.Summary()})
}

// Banner is an expect.yaml banner, written "policy: <the policy's Debug
// form as the router prints it>" (assertions.DocumentedPolicy). It checks
// its form when a row is read.
type Banner string

// Check implements yamlbind.Checker.
func (b Banner) Check() []string {
	if _, err := assertions.DocumentedPolicy(string(b)); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// ExpectBanner asserts the banner shows the documented policy.
func ExpectBanner(b routerlog.Banner, documented Banner) {
	GinkgoHelper()
	Expect(b).To(assertions.HaveStartedWithBanner(string(documented)), "the router's startup banner")
}
