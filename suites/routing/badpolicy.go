package routing

import (
	"cmp"
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
	Spec:       func(p api.Pair, input func() Input) { describeBadValues(ClaimBadPolicy, p, input) },
})

// describeBadValues defines a BadPolicySpec per documented bad value of
// claim for p: one for --policy, or for the flag the value names.
func describeBadValues(claim string, p api.Pair, input func() Input) {
	for _, v := range badValues(claim, p) {
		text := v.FlagName() + " " + v.Value
		switch {
		case v.Value == "" && claim == ClaimBadPolicy:
			text = "any --policy"
		case v.Value == "":
			text = "any bad value"
		}
		Describe(text, func() {
			BadPolicySpec(func() BadPolicySpecInput {
				return BadPolicySpecInput{Input: input(), Claim: claim, Value: v.Value, Flag: v.Flag}
			})
		})
	}
}

// BadPolicySpecInput is the input of BadPolicySpec.
type BadPolicySpecInput struct {
	Input
	// Claim is the claim whose expect.yaml row documents the value
	// (default badpolicy; pdbadpolicy runs it on prefill/decode pairs).
	Claim string
	// Value is the value to refuse; "" for a pair the claim does not apply
	// to (the spec then skips with the documented reason).
	Value string
	// Flag is the flag given the value: "" for --policy, or
	// --prefill-policy, --decode-policy as the row documents.
	Flag string
}

// BadPolicySpec: a --policy value the router does not accept passes
// admission (the operator does not check values) and stops the router at
// startup: exit code 2, clap's error with its possible values (and a tip for
// a near miss) in the previous container's log, RouterReady False, and the
// deployment never Ready. The deployment is deleted as soon as all that is
// confirmed: on a GPU cluster its engines hold accelerators for nothing.
func BadPolicySpec(input func() BadPolicySpecInput) {
	var (
		in   BadPolicySpecInput
		spec string
		bp   fixtures.BadPolicy
		bad  fixtures.BadValue
		pd   *fixtures.PD
	)
	BeforeEach(func() {
		in = input()
		spec = cmp.Or(in.Claim, ClaimBadPolicy)
		exp := in.begin("BadPolicySpec", spec)
		Expect(exp.BadPolicy).NotTo(BeNil(), "fixtures/expect.yaml: claims[%s] row %s has no badPolicy", spec, in.Pair)
		bp, pd = *exp.BadPolicy, exp.PD
		i := slices.IndexFunc(bp.Values, func(v fixtures.BadValue) bool { return v.Value == in.Value && v.Flag == in.Flag })
		Expect(i).To(BeNumerically(">=", 0), "invalid argument: %q is not a documented bad %s value of %s", in.Value, cmp.Or(in.Flag, "--policy"), in.Pair)
		bad = bp.Values[i]
	})

	It("stops the router at startup with clap's error and exit code 2, and the deployment never becomes Ready", func(ctx SpecContext) {
		name := spec + "-" + in.Value
		if bad.Flag != "" {
			name = spec + "-" + strings.TrimSuffix(strings.TrimPrefix(bad.Flag, "--"), "-policy") + "-" + in.Value
		}
		own := in.own(in.Pair, objectName(name, in.Pair), bad.FlagName(), in.Value)
		own.PD = pd
		dep, err := own.Create(ctx, in.Target, spec)
		Expect(err).NotTo(HaveOccurred(), "creating %s", own.Name)

		var clap routerlog.ClapError
		crash := in.awaitCrash(ctx, spec, dep, func(logs string) (err error) {
			clap, err = routerlog.FindClapError(logs)
			return err
		})
		crashed, stderr, cond := crash.Pod, crash.Text, crash.RouterReady

		given := bad.FlagName() + " " + in.Value
		report.Record(report.RouterExit{Claim: spec, Pair: in.Pair.String(), Value: in.Value, ExitCode: crashed.LastExitCode,
			Restarts: crashed.Restarts, Ready: crashed.Ready, RouterReady: cond, Stderr: clap.Text})
		report.Record(report.Claim{Claim: spec, Pair: in.Pair.String(),
			Expected: fmt.Sprintf("%s: exit %d, %s", given, bp.ExitCode, tipWords(bad.Tip)),
			Measured: fmt.Sprintf("%s: exit %d, %q, %s, RouterReady %s", given, *crashed.LastExitCode, clap.Message, tipWords(strings.Join(clap.Tips, ", ")), cond)})

		Expect(*crashed.LastExitCode).To(BeEquivalentTo(bp.ExitCode), "the router's exit code")
		refused := assertions.HaveRefusedPolicyValue(in.Value, bp.ArgOf(bad)).WithPossibleValues(bp.PossibleValues...).WithLines(bp.ClapError(bad)...)
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

// badValues are claim's documented bad values for a pair, or one empty
// value when the claim does not apply (so the pair still shows as skipped,
// with the reason).
func badValues(claim string, p api.Pair) []fixtures.BadValue {
	exp, err := fixtures.Lookup(claim, p)
	if err != nil || exp.BadPolicy == nil {
		return []fixtures.BadValue{{}}
	}
	return exp.BadPolicy.Values
}
