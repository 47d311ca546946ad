package framework

import (
	"context"
	"errors"
	"fmt"
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
//
// The registry builds all of it but the Target while the tree is built,
// and each spec function checks it then (CheckInput); the Target is the
// suite's, set up before any spec runs and added when the spec starts.
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
	// invalid takes what CheckInput finds wrong: the registry's, which
	// fails the suite's setup with it.
	invalid func(error)
}

// Input is what a claim's spec function gets: the common part, and the
// pair's row of expect.yaml read into the claim's row type. A spec
// function that needs nothing else takes it as it is; one with knobs of
// its own takes an XSpecInput that embeds it and adds them.
type Input[R any] struct {
	Spec
	// Expect is the claim's documented outcome for Pair.
	Expect R
}

// Check names what is wrong with the part of the input built with the
// tree: the claim, the pair, the row and the case's deployment. The
// Target is the suite's and not checked here.
func (in Spec) Check() error {
	switch {
	case in.Claim == "":
		return errors.New("input.Claim is empty")
	case in.Pair.Router == "":
		return errors.New("input.Pair.Router is empty")
	case in.Pair.Engine == "":
		return errors.New("input.Pair.Engine is empty")
	case in.rowErr != nil:
		return fmt.Errorf("input.Row, the claim's row of %s: %w", fixtures.ExpectPath, in.rowErr)
	case in.Case.Deployment != nil && in.Deployment == nil:
		return fmt.Errorf("input.Deployment is nil, and case %q needs one", in.Case.Name)
	}
	return nil
}

func (in Spec) spec() Spec { return in }

// SpecInput is the input of a spec function: Input (or Spec) itself, or
// an XSpecInput that embeds it, whose Check adds its own knobs' checks to
// the embedded one's.
type SpecInput interface {
	Check() error
	spec() Spec
}

// CheckInput is a spec function's first call, made while the tree is
// built: it gets the input once (everything but the Target, which the
// suite sets up before any spec runs) and checks it, so that an input the
// spec cannot run with fails the suite's setup, naming the spec function
// and the field, before any spec runs rather than inside one. An input
// built outside the registry panics instead.
func CheckInput[I SpecInput](spec string, input func() I) {
	in := input()
	err := in.Check()
	if err == nil {
		return
	}
	s := in.spec()
	err = fmt.Errorf("invalid argument: %s for claim %q on %s: %w", spec, s.Claim, s.Pair, err)
	if s.invalid == nil {
		panic(err)
	}
	s.invalid(err)
}

// SkipIfNotApplicable skips the spec when the docs say the claim does not
// apply to the pair, with their reason.
func (in Spec) SkipIfNotApplicable() {
	GinkgoHelper()
	if in.Row.NotApplicable != "" {
		Skip("not applicable: " + in.Row.NotApplicable)
	}
}

// Begin is the preamble of a spec that runs engines: the claim applies to
// the pair and the target can run it (else the spec skips, with the
// reason). Its input was checked when the tree was built (CheckInput).
func (in Spec) Begin() {
	GinkgoHelper()
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
	in.needsDeployment()
	return in.Deployment.Ready(ctx, in.Target, in.Claim, in.Case.Deployment.RouterArgs)
}

// needsDeployment fails a spec that asks for its case's deployment when
// the case has none: its spec function runs a case it was not written for.
// (A case that names one has it: CheckInput saw to that.)
func (in Spec) needsDeployment() {
	GinkgoHelper()
	Expect(in.Case.Deployment).NotTo(BeNil(), "case %q of %s names no deployment, and the spec needs one", in.Case.Name, in.Claim)
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
