package routing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// BadPolicySpecInput is the input of BadPolicySpec.
type BadPolicySpecInput struct {
	Target
	Pair fixtures.Pair
	// Value is the --policy value to refuse; "" for a pair the claim does
	// not apply to (the spec then skips with the documented reason).
	Value string
}

// BadPolicySpec: a --policy value the router does not accept passes
// admission (the operator does not check values) and stops the router at
// startup: exit code 2, clap's error with its possible values (and a tip for
// a near miss) in the previous container's log, RouterReady False, and the
// deployment never Ready.
func BadPolicySpec(input func() BadPolicySpecInput) {
	const spec = config.SpecBadPolicy
	var (
		in  BadPolicySpecInput
		bp  fixtures.BadPolicy
		bad fixtures.BadValue
	)
	BeforeEach(func() {
		in = input()
		in.check("BadPolicySpec", in.Pair)
		exp := expectation(fixtures.ClaimBadPolicy, in.Pair)
		in.requireRunnable(in.Pair)
		bp = *exp.BadPolicy
		i := slices.IndexFunc(bp.Values, func(v fixtures.BadValue) bool { return v.Value == in.Value })
		Expect(i).To(BeNumerically(">=", 0), "invalid argument: %q is not a documented bad --policy value of %s", in.Value, in.Pair)
		bad = bp.Values[i]
	})

	It("stops the router at startup with clap's error and exit code 2, and the deployment never becomes Ready", func(ctx SpecContext) {
		name := objectName(spec+"-"+in.Value, in.Pair)
		dep := in.deploy(ctx, spec, in.build(in.Pair, name, fixtures.WithRouterArgs("--policy", in.Value)))

		By("waiting for the router container to exit")
		var crashed clusters.RouterPod
		in.eventually(ctx, spec, config.OpWaitRouterCrash, func(ctx context.Context) error {
			pods, err := dep.RouterState(ctx)
			if err != nil {
				return err
			}
			for _, p := range pods {
				if p.LastExitCode != nil {
					crashed = p
					return nil
				}
			}
			return fmt.Errorf("no router container has terminated yet: %+v", pods)
		}).Should(Succeed())

		By("reading clap's error from the previous container's log")
		var clap routerlog.ClapError
		var stderr string
		in.eventually(ctx, spec, config.OpWaitLogs, func(ctx context.Context) error {
			logs, err := dep.RouterLogs(ctx, clusters.LogOptions{Previous: true})
			if err != nil {
				return err
			}
			stderr = routerlog.StripANSI(logs)
			clap, err = routerlog.FindClapError(logs)
			return err
		}).Should(Succeed())

		By("checking RouterReady is False")
		var cond string
		in.eventually(ctx, spec, config.OpWaitRouterCrash, func(ctx context.Context) error {
			obj, err := dep.Object(ctx)
			if err != nil {
				return err
			}
			c := obj.Status.FindCondition(api.ConditionRouterReady)
			if c == nil {
				return errors.New("RouterReady is not reported yet")
			}
			cond = c.Status + "/" + c.Reason
			if c.Status != "False" {
				return fmt.Errorf("RouterReady is %s: %s", cond, c.Message)
			}
			return nil
		}).Should(Succeed())

		report.Record(report.RouterExit{Claim: fixtures.ClaimBadPolicy, Pair: in.Pair.String(), Value: in.Value, ExitCode: crashed.LastExitCode,
			Restarts: crashed.Restarts, Ready: crashed.Ready, RouterReady: cond, Stderr: clap.Text})
		report.Record(report.Claim{Claim: fixtures.ClaimBadPolicy, Pair: in.Pair.String(),
			Expected: fmt.Sprintf("--policy %s: exit %d, %s", in.Value, bp.ExitCode, tipWords(bad.Tip)),
			Measured: fmt.Sprintf("--policy %s: exit %d, %q, %s, RouterReady %s", in.Value, *crashed.LastExitCode, clap.Message, tipWords(strings.Join(clap.Tips, ", ")), cond)})

		Expect(*crashed.LastExitCode).To(BeEquivalentTo(bp.ExitCode), "the router's exit code")
		Expect(clap.Kind).To(Equal(routerlog.InvalidValue), "clap's error:\n%s", clap.Text)
		Expect(clap.Value).To(Equal(in.Value))
		Expect(clap.Arg).To(Equal(bp.Arg))
		Expect(clap.PossibleValues).To(Equal(bp.PossibleValues))
		if bad.Tip != "" {
			Expect(clap.Tips).To(ConsistOf(bad.Tip), "clap's tip")
		} else {
			Expect(clap.Tips).To(BeEmpty(), "no value is close enough to %q for a tip", in.Value)
		}
		for _, line := range bp.ClapError(bad) {
			Expect(stderr).To(ContainSubstring(line), "the previous container's log")
		}

		By("checking the deployment never becomes Ready")
		in.consistently(ctx, spec, config.OpConsistently, func(ctx context.Context) error {
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
func badValues(p fixtures.Pair) []string {
	exp, err := fixtures.Lookup(fixtures.ClaimBadPolicy, p)
	if err != nil || exp.BadPolicy == nil {
		return []string{""}
	}
	var out []string
	for _, v := range exp.BadPolicy.Values {
		out = append(out, v.Value)
	}
	return out
}

var _ = Describe("Bad policy", Label(claimLabels(fixtures.ClaimBadPolicy, "policy:invalid", LabelNeedsGPU)...), func() {
	for _, p := range fixtures.DocumentedPairs {
		Describe(p.String(), Label(p.Labels()...), func() {
			for _, v := range badValues(p) {
				text := "--policy " + v
				if v == "" {
					text = "any --policy"
				}
				Describe(text, func() {
					BadPolicySpec(func() BadPolicySpecInput { return BadPolicySpecInput{Target: suite, Pair: p, Value: v} })
				})
			}
		})
	}
})
