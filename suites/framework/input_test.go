package framework

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// knobInput is a spec input with a knob of its own, as a claim's
// XSpecInput is.
type knobInput struct {
	Input[emptyRow]
	Requests int
}

func (in knobInput) Check() error {
	if err := in.Input.Check(); err != nil {
		return err
	}
	if in.Requests < 0 {
		return fmt.Errorf("input.Requests must be at least 0 (got %d)", in.Requests)
	}
	return nil
}

func TestSpecCheckNamesTheFieldBuiltWithTheTree(t *testing.T) {
	ok := Spec{Claim: "latency", Pair: vr}
	cases := []struct {
		in   Spec
		want string
	}{
		{Spec{Pair: vr}, "input.Claim is empty"},
		{Spec{Claim: "latency"}, "input.Pair.Router is empty"},
		{Spec{Claim: "latency", Pair: vr, rowErr: errors.New("line 7: unknown field")}, "input.Row, the claim's row of fixtures/expect.yaml: line 7: unknown field"},
		{Spec{Claim: "latency", Pair: vr, Case: Case{Name: "a", Deployment: Shared(nil)}}, `input.Deployment is nil, and case "a" needs one`},
	}
	for _, c := range cases {
		if err := c.in.Check(); err == nil || err.Error() != c.want {
			t.Errorf("Check() = %v, want %q", err, c.want)
		}
	}
	if err := ok.Check(); err != nil {
		t.Errorf("a complete input: %v", err)
	}
	ok.Case, ok.Deployment = Case{Deployment: Shared(nil)}, NewPairDeployment(vr, Deployment{}, "md")
	if err := ok.Check(); err != nil {
		t.Errorf("a complete input with its deployment: %v", err)
	}
}

func TestCheckInputGoesToTheRegistryWithTheSpecAndField(t *testing.T) {
	r := &Registry{}
	base := Spec{Claim: "latency", Pair: vr, invalid: r.noteInvalid}
	calls := 0
	CheckInput("LatencySpec", func() knobInput {
		calls++
		return knobInput{Input: Input[emptyRow]{Spec: base}, Requests: 20}
	})
	if calls != 1 || r.CheckInputs() != nil {
		t.Fatalf("a good input: %d calls, %v", calls, r.CheckInputs())
	}
	CheckInput("LatencySpec", func() knobInput { return knobInput{Input: Input[emptyRow]{Spec: base}, Requests: -1} })
	CheckInput("OtherSpec", func() Input[emptyRow] {
		in := Input[emptyRow]{Spec: base}
		in.Claim = ""
		return in
	})
	err := r.CheckInputs()
	want := []string{
		`invalid argument: LatencySpec for claim "latency" on vllm-router+vLLM: input.Requests must be at least 0 (got -1)`,
		`invalid argument: OtherSpec for claim "" on vllm-router+vLLM: input.Claim is empty`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("CheckInputs() = %v, want\n%s", err, strings.Join(want, "\n"))
	}
}

func TestCheckInputOutsideTheRegistryPanics(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "input.Claim is empty") {
			t.Errorf("recovered %v, want the input's error", p)
		}
	}()
	CheckInput("LatencySpec", func() Input[emptyRow] { return Input[emptyRow]{} })
}
