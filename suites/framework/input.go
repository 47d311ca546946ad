package framework

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// Spec is the part of every spec's input that does not depend on its
// claim's row type: the target, the claim, pair and case it runs, the
// common part of its row and the deployment it runs against. Its methods
// are the spec helpers; each waits with the claim's intervals and records
// evidence under the claim and pair.
type Spec struct {
	Target
	// Claim is the claim's name: its interval keys and report entries.
	Claim string
	Pair  api.Pair
	// Row is the common part of the pair's expect.yaml row (summary,
	// router args, derivation, not-applicable reason).
	Row fixtures.Row
	// Case is the case the spec runs, with the deployment it needs.
	Case Case
	// Deployment is the deployment of Pair the case runs against: shared
	// with the other cases of its Ordered container (created by the first
	// spec that needs it, deleted after the last), or the spec's own
	// (created when it first asks, deleted when it ends). Nil when the
	// case needs none.
	Deployment *PairDeployment
	// rowErr is why the row could not be read into the claim's type.
	rowErr error
}

// Input is what a claim's spec function gets: the common part, and the
// pair's row of expect.yaml read into the claim's row type. Each claim's
// XSpecInput embeds it and adds the claim's own knobs.
type Input[R any] struct {
	Spec
	// Expect is the claim's documented outcome for Pair.
	Expect R
}

// Check fails the spec when it was handed an incomplete input.
func (in Spec) Check(spec string) {
	GinkgoHelper()
	Expect(in.Config).NotTo(BeNil(), "invalid argument: input.Config can't be nil when calling %s", spec)
	Expect(in.Cluster).NotTo(BeNil(), "invalid argument: input.Cluster can't be nil when calling %s", spec)
	Expect(in.Claim).NotTo(BeEmpty(), "invalid argument: input.Claim can't be empty when calling %s", spec)
	Expect(in.Pair.Router).NotTo(BeEmpty(), "invalid argument: input.Pair.Router can't be empty when calling %s", spec)
	Expect(in.Pair.Engine).NotTo(BeEmpty(), "invalid argument: input.Pair.Engine can't be empty when calling %s", spec)
	Expect(in.rowErr).NotTo(HaveOccurred(), "the claim's row of %s", fixtures.ExpectPath)
}

// SkipIfNotApplicable skips the spec when the docs say the claim does not
// apply to the pair, with their reason.
func (in Spec) SkipIfNotApplicable() {
	GinkgoHelper()
	if in.Row.NotApplicable != "" {
		Skip("not applicable: " + in.Row.NotApplicable)
	}
}

// Begin is the preamble of a spec that runs engines: the input is
// complete, the claim applies to the pair and the target can run it (else
// the spec skips, with the reason).
func (in Spec) Begin(spec string) {
	GinkgoHelper()
	in.Check(spec)
	in.SkipIfNotApplicable()
	in.RequireRunnable(in.Pair)
}

// RequestsOr is a spec input's request count n, or e2e.yaml's
// traffic.requests when the input leaves it 0.
func (in Spec) RequestsOr(n int) int {
	if n == 0 {
		return in.Config.Traffic.Requests
	}
	return n
}

// Interval is the [timeout, poll] of op for the spec's claim.
func (in Spec) Interval(op string) config.Interval {
	GinkgoHelper()
	return IntervalOf(in.Config, in.Claim, op)
}

// Eventually is Gomega's Eventually with the interval of <claim>/op from
// e2e.yaml. Each poll's context ends with the interval (withinDeadline),
// so a call that hangs fails the wait within its interval.
func (in Spec) Eventually(ctx context.Context, op string, f any) AsyncAssertion {
	GinkgoHelper()
	iv := in.Interval(op)
	return Eventually(ctx, withinDeadline(time.Now().Add(iv.Timeout.D()), f)).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D())
}

// Consistently is Gomega's Consistently with the interval of <claim>/op.
func (in Spec) Consistently(ctx context.Context, op string, f any) AsyncAssertion {
	GinkgoHelper()
	iv := in.Interval(op)
	return Consistently(ctx, f).WithTimeout(iv.Timeout.D()).WithPolling(iv.Poll.D())
}

// Ready is the case's deployment, Ready with the case's router args:
// created by this spec if no spec has (it skips when a target with finite
// capacity has no room), else edited to them if they differ
// (PairDeployment.Use), then waited for.
func (in Spec) Ready(ctx context.Context) clusters.Deployment {
	GinkgoHelper()
	Expect(in.Deployment).NotTo(BeNil(), "invalid argument: input.Deployment is nil, and case %q of %s needs one", in.Case.Name, in.Claim)
	Expect(in.Case.Deployment).NotTo(BeNil(), "invalid argument: case %q of %s names no deployment", in.Case.Name, in.Claim)
	return in.Deployment.Ready(ctx, in.Target, in.Claim, in.Case.Deployment.RouterArgs)
}

// Record attaches the spec's verdict line: what the docs say beside what
// this run measured.
func (in Spec) Record(expected, measured string) {
	report.Record(report.Claim{Claim: in.Claim, Pair: in.Pair.String(), Expected: expected, Measured: measured})
}

// Replicas lists the engine replicas, expecting the configured count.
func (in Spec) Replicas(ctx context.Context, dep clusters.Deployment) []clusters.Replica {
	GinkgoHelper()
	rs, err := dep.Replicas(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(rs).To(HaveLen(int(in.Config.Replicas)), "engine replicas of %s", dep.Name())
	return rs
}
