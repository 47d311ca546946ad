package routing

import (
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// The spec inputs with fields of their own name the one that is wrong; the
// framework checks them while the tree is built (framework.CheckInput).
func TestSpecInputsNameTheirOwnFields(t *testing.T) {
	base := framework.Spec{Claim: "x", Pair: fixtures.VLLMRouterVLLM, Case: framework.Case{Name: "ten"}}
	notApplicable := base
	notApplicable.Row.NotApplicable = "not here"
	held := &HeldCase{Name: "ten"}
	cases := []struct {
		name string
		in   framework.SpecInput
		want string // "" : no error
	}{
		{"a held case", ThresholdSpecInput{Input: framework.Input[ThresholdsRow]{Spec: base}, Held: held}, ""},
		{"no held case", ThresholdSpecInput{Input: framework.Input[ThresholdsRow]{Spec: base}}, `input.Held is nil: case "ten" is not one of the row's thresholds in fixtures/expect.yaml`},
		{"no case where none applies", ThresholdSpecInput{Input: framework.Input[ThresholdsRow]{Spec: notApplicable}}, ""},
		{"no bad value", BadPolicySpecInput{Spec: base}, `input.Value is nil: case "ten" is not one of the row's badPolicy.values`},
		{"no bad threshold", BadThresholdSpecInput{Input: framework.Input[BadThresholdRow]{Spec: base}}, "input.Bad is nil"},
		{"no routing case", RoutingTextSpecInput{Input: framework.Input[RoutingTextRow]{Spec: base}}, "input.Routing is nil"},
		{"negative requests", AffinitySpecInput{Input: framework.Input[AffinityRow]{Spec: base}, Requests: -1}, "input.Requests must be at least 0"},
		{"a level of 0", ConcurrencySpecInput{Input: framework.Input[ConcurrencyRow]{Spec: base}, Levels: []int{1, 0}}, "input.Levels[1] must be at least 1 (got 0)"},
		{"no fault", FaultSpecInput{Input: framework.Input[FaultRow]{Spec: base}}, "input.Inject is nil"},
		{"the common part first", SwitchSpecInput{Input: framework.Input[SwitchRow]{Spec: framework.Spec{Pair: base.Pair}}, Requests: -1}, "input.Claim is empty"},
	}
	for _, c := range cases {
		err := c.in.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Check() = %v, want %q", c.name, err, c.want)
		}
	}
}
