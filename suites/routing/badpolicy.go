package routing

import (
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimBadPolicy: a --policy value the router does not accept stops it at
// startup with clap's error, and the deployment never becomes Ready.
const ClaimBadPolicy = "badpolicy"

// BadPolicyRow is what badpolicy's rows state.
type BadPolicyRow struct {
	BadPolicy BadPolicy `json:"badPolicy"`
}

var _ = framework.Add(Registry, framework.Claim[BadPolicyRow]{
	Name:  ClaimBadPolicy,
	Title: "Bad policy",
	Asserts: "`roundrobin`, and values valid only on the other router, edited into the running deployment, stop the new " +
		"router Pod at startup: exit 2, clap's message (with its tip where clap gives one), never Ready while the previous " +
		"router Pod keeps serving (RouterReady stays True); edited back, the router is Ready again with the same engine Pods " +
		"(created with the value under `E2E_ISOLATE=1`: RouterReady False, never Ready)",
	Labels: []string{"policy:invalid", fixtures.LabelNeedsGPU},
	// Each bad value is edited into the pair's shared deployment and back
	// once the refusal is confirmed (framework.Spec.Refuse).
	Cases: func(_ fixtures.Row, r BadPolicyRow) []framework.Case { return r.BadPolicy.cases(nil) },
	Specs: func(input func() framework.Input[BadPolicyRow]) {
		BadPolicySpec(func() BadPolicySpecInput {
			in := input()
			return BadPolicySpecInput{Spec: in.Spec, BadPolicy: in.Expect.BadPolicy, Value: in.Expect.BadPolicy.value(in.Case.Name)}
		})
	},
})

// BadPolicy is clap's refusal of bad policy values (docs/routers.md#clap-errors).
type BadPolicy struct {
	ExitCode       int        `json:"exitCode"`
	Arg            string     `json:"arg"`
	PossibleValues []string   `json:"possibleValues"`
	Values         []BadValue `json:"values"`
}

// Check implements yamlbind.Checker.
func (b BadPolicy) Check() []string {
	var out []string
	need := func(ok bool, format string, args ...any) {
		if !ok {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	need(len(b.Values) > 0 && len(b.PossibleValues) > 0, "values and possibleValues must not be empty")
	for _, v := range b.Values {
		need(slices.Contains([]string{"", "--prefill-policy", "--decode-policy"}, v.Flag), "bad value %q: flag %q is not one of --prefill-policy, --decode-policy (empty: --policy)", v.Value, v.Flag)
		need(!slices.Contains(b.PossibleValues, v.Value), "bad value %q is a possible value", v.Value)
		need(v.Tip == "" || slices.Contains(b.PossibleValues, v.Tip), "tip %q is not a possible value", v.Tip)
	}
	return out
}

// BadValue is one refused value; Tip is clap's suggestion ("" = no tip line,
// as clap prints none below a Jaro similarity of 0.7).
type BadValue struct {
	Value string `json:"value"`
	Tip   string `json:"tip,omitempty"`
	Why   string `json:"why"`
	// Flag is the flag given the value: --policy when empty, or
	// --prefill-policy, --decode-policy.
	Flag string `json:"flag,omitempty"`
}

// FlagName is the flag the value is given to (--policy by default).
func (v BadValue) FlagName() string {
	if v.Flag == "" {
		return "--policy"
	}
	return v.Flag
}

// caseName names the value's case: "--policy roundrobin".
func (v BadValue) caseName() string { return v.FlagName() + " " + v.Value }

// cases are a case per bad value, each edited into the pair's shared
// deployment (of shape, when the claim runs on a prefill/decode pair).
func (b BadPolicy) cases(shape *PDShape) []framework.Case {
	var out []framework.Case
	for _, v := range b.Values {
		d := &framework.Deployment{RouterArgs: []string{v.FlagName(), v.Value}, Refused: true}
		if shape != nil {
			d.Prefill, d.Decode = shape.Prefill, shape.Decode
		}
		out = append(out, framework.Case{Name: v.caseName(), Deployment: d})
	}
	return out
}

// ArgOf is clap's name for v's flag in its error: the row's arg for
// --policy, else "<flag> <VALUE_NAME>", the value name being the field's
// name upper-cased ('--prefill-policy <PREFILL_POLICY>').
func (b BadPolicy) ArgOf(v BadValue) string {
	if v.Flag == "" {
		return b.Arg
	}
	name := strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(v.Flag, "--"), "-", "_"))
	return fmt.Sprintf("%s <%s>", v.Flag, name)
}

// ClapError is the text clap writes to stderr for value v (docs/routers.md#clap-errors):
// the lines the router's previous container log must contain.
func (b BadPolicy) ClapError(v BadValue) []string {
	lines := []string{
		fmt.Sprintf("error: invalid value '%s' for '%s'", v.Value, b.ArgOf(v)),
		fmt.Sprintf("  [possible values: %s]", strings.Join(b.PossibleValues, ", ")),
	}
	if v.Tip != "" {
		lines = append(lines, fmt.Sprintf("  tip: a similar value exists: '%s'", v.Tip))
	}
	return append(lines, "For more information, try '--help'.")
}

// BadPolicySpecInput is the input of BadPolicySpec.
type BadPolicySpecInput struct {
	framework.Spec
	// BadPolicy is the row's refusal; the case names the value to refuse.
	BadPolicy BadPolicy
	// Value is the bad value of BadPolicy the case runs.
	Value *BadValue
}

// Check implements framework.SpecInput.
func (in BadPolicySpecInput) Check() error {
	return checkCase(in.Spec, "Value", "badPolicy.values", in.Value)
}

// value is the bad value the case named name runs, nil when none is.
func (b BadPolicy) value(name string) *BadValue {
	return caseOf(name, b.Values, BadValue.caseName)
}

// BadPolicySpec: a policy value the router does not accept passes
// admission (the operator does not check values) and stops the router at
// startup: exit code 2, clap's error with its possible values (and a tip for
// a near miss) in the previous container's log, and the router never Ready.
// The value is edited into the pair's shared deployment: the new router Pod
// never becomes Ready while the previous one keeps serving, and the value
// is edited back as soon as all that is confirmed. On a deployment created
// with the value (E2E_ISOLATE=1), RouterReady is False and the deployment
// never Ready; it is deleted as soon as that is confirmed. badpolicy runs it
// for --policy, pdbadpolicy for the per-pool flags.
func BadPolicySpec(input func() BadPolicySpecInput) {
	framework.CheckInput("BadPolicySpec", input)
	var (
		in  BadPolicySpecInput
		bad BadValue
	)
	BeforeEach(func() {
		in = input()
		in.Begin()
		bad = *in.Value
	})

	It("stops the router at startup with clap's error and exit code 2, and the router never becomes Ready", func(ctx SpecContext) {
		bp := in.BadPolicy
		var clap routerlog.ClapError
		r := in.Refuse(ctx, func(logs string) (err error) {
			clap, err = routerlog.FindClapError(logs)
			return err
		})
		crash := r.RouterCrash
		recordCrash(in.Spec, bad.Value, crash, clap.Text)
		in.Record(fmt.Sprintf("%s: exit %d, %s", in.Case.Name, bp.ExitCode, tipWords(bad.Tip)),
			fmt.Sprintf("%s: exit %d, %q, %s; %s", in.Case.Name, *crash.Pod.LastExitCode, clap.Message, tipWords(strings.Join(clap.Tips, ", ")), r.Words()))

		Expect(crash.Pod).To(assertions.HaveExitedWith(bp.ExitCode), "the router's exit code")
		refused := assertions.HaveRefusedPolicyValue(bad.Value, bp.ArgOf(bad)).WithPossibleValues(bp.PossibleValues...).WithLines(bp.ClapError(bad)...)
		if bad.Tip != "" {
			refused = refused.WithTip(bad.Tip)
		} else {
			refused = refused.WithoutTip() // no value is close enough for clap to offer one
		}
		Expect(crash.Text).To(refused, "the previous container's log")

		in.ExpectRefused(ctx, r)
		r.End(ctx)
	})
}

func tipWords(tip string) string {
	if tip == "" {
		return "no tip"
	}
	return "tip '" + tip + "'"
}

// recordCrash records a router that stopped at startup.
func recordCrash(in framework.Spec, value string, crash framework.RouterCrash, stderr string) {
	report.Record(report.RouterExit{Claim: in.Claim, Pair: in.Pair.String(), Value: value, ExitCode: crash.Pod.LastExitCode,
		Restarts: crash.Pod.Restarts, Ready: crash.Pod.Ready, RouterReady: crash.RouterReady, Stderr: stderr})
}
