package routing

import (
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// ClaimBadPolicy: a --policy the router does not accept stops it at startup.
const ClaimBadPolicy = "badpolicy"

var _ = register(Claim{
	Name:   ClaimBadPolicy,
	Title:  "Bad policy",
	Labels: []string{"policy:invalid", LabelNeedsGPU},
	Require: func(e fixtures.Expectation) []string {
		return need(nil, e.BadPolicy != nil && len(e.BadPolicy.Values) > 0 && len(e.BadPolicy.PossibleValues) > 0,
			"badpolicy needs badPolicy.values and possibleValues")
	},
	// Each bad value is a deployment of its own, deleted as soon as the
	// crash is confirmed: no other claim can use a router that never starts.
	Deployment: nil,
	Spec: func(p api.Pair, input func() Input) {
		for _, v := range badValues(p) {
			text := "--policy " + v
			if v == "" {
				text = "any --policy"
			}
			Describe(text, func() {
				BadPolicySpec(func() BadPolicySpecInput { return BadPolicySpecInput{Input: input(), Value: v} })
			})
		}
	},
})

// BadPolicySpecInput is the input of BadPolicySpec.
type BadPolicySpecInput struct {
	Input
	// Value is the --policy value to refuse; "" for a pair the claim does
	// not apply to (the spec then skips with the documented reason).
	Value string
}

// BadPolicySpec: a --policy value the router does not accept passes
// admission (the operator does not check values) and stops the router at
// startup: exit code 2, clap's error with its possible values (and a tip for
// a near miss) in the previous container's log, RouterReady False, and the
// deployment never Ready. The deployment is deleted as soon as all that is
// confirmed: on a GPU cluster its engines hold accelerators for nothing.
func BadPolicySpec(input func() BadPolicySpecInput) {
	const spec = ClaimBadPolicy
	var (
		in  BadPolicySpecInput
		bp  fixtures.BadPolicy
		bad fixtures.BadValue
	)
	BeforeEach(func() {
		in = input()
		exp := in.begin("BadPolicySpec", ClaimBadPolicy)
		bp = *exp.BadPolicy
		i := slices.IndexFunc(bp.Values, func(v fixtures.BadValue) bool { return v.Value == in.Value })
		Expect(i).To(BeNumerically(">=", 0), "invalid argument: %q is not a documented bad --policy value of %s", in.Value, in.Pair)
		bad = bp.Values[i]
	})

	It("stops the router at startup with clap's error and exit code 2, and the deployment never becomes Ready", func(ctx SpecContext) {
		own := in.own(in.Pair, objectName(spec+"-"+in.Value, in.Pair), "--policy", in.Value)
		dep, err := own.Create(ctx, in.Target, spec)
		Expect(err).NotTo(HaveOccurred(), "creating %s", own.Name)

		var clap routerlog.ClapError
		crash := in.awaitCrash(ctx, spec, dep, func(logs string) (err error) {
			clap, err = routerlog.FindClapError(logs)
			return err
		})
		crashed, stderr, cond := crash.Pod, crash.Text, crash.RouterReady

		report.Record(report.RouterExit{Claim: ClaimBadPolicy, Pair: in.Pair.String(), Value: in.Value, ExitCode: crashed.LastExitCode,
			Restarts: crashed.Restarts, Ready: crashed.Ready, RouterReady: cond, Stderr: clap.Text})
		report.Record(report.Claim{Claim: ClaimBadPolicy, Pair: in.Pair.String(),
			Expected: fmt.Sprintf("--policy %s: exit %d, %s", in.Value, bp.ExitCode, tipWords(bad.Tip)),
			Measured: fmt.Sprintf("--policy %s: exit %d, %q, %s, RouterReady %s", in.Value, *crashed.LastExitCode, clap.Message, tipWords(strings.Join(clap.Tips, ", ")), cond)})

		Expect(*crashed.LastExitCode).To(BeEquivalentTo(bp.ExitCode), "the router's exit code")
		refused := assertions.HaveRefusedPolicyValue(in.Value, bp.Arg).WithPossibleValues(bp.PossibleValues...).WithLines(bp.ClapError(bad)...)
		if bad.Tip != "" {
			refused = refused.WithTip(bad.Tip)
		} else {
			refused = refused.WithoutTip() // no value is close enough for clap to offer one
		}
		Expect(stderr).To(refused, "the previous container's log")

		in.expectNeverReady(ctx, spec, dep)

		own.Release(ctx, in.Target)
	})
}

func tipWords(tip string) string {
	if tip == "" {
		return "no tip"
	}
	return "tip '" + tip + "'"
}

// badValues are the documented bad values of a pair, or one "" when the
// claim does not apply (so the pair still shows as skipped, with the reason).
func badValues(p api.Pair) []string {
	exp, err := fixtures.Lookup(ClaimBadPolicy, p)
	if err != nil || exp.BadPolicy == nil {
		return []string{""}
	}
	var out []string
	for _, v := range exp.BadPolicy.Values {
		out = append(out, v.Value)
	}
	return out
}
