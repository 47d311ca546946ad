package routing

import (
	"errors"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimBadThreshold: a cache_aware threshold the router cannot accept
// stops it at startup, with clap's error when the value does not parse
// and the policy's own validation error when it parses but is out of range.
const ClaimBadThreshold = "badthreshold"

// BadThresholdRow is what badthreshold's rows state.
type BadThresholdRow struct {
	BadThresholds []BadThreshold `json:"badThresholds"`
}

// BadThreshold is a cache_aware threshold value the router refuses at
// startup, and how.
type BadThreshold struct {
	// Arg is the argv token, e.g. --cache-threshold=abc (the = form, so a
	// leading '-' in the value is not taken for a flag).
	Arg      string `json:"arg"`
	ExitCode int    `json:"exitCode"`
	// Lines are what the previous container's log holds, verbatim.
	Lines []string `json:"lines"`
	Why   string   `json:"why"`
}

// Check implements yamlbind.Checker.
func (b BadThreshold) Check() []string {
	var out []string
	if !strings.HasPrefix(b.Arg, "--") || !strings.Contains(b.Arg, "=") {
		out = append(out, "arg must be --flag=value")
	}
	if b.ExitCode < 1 || len(b.Lines) == 0 {
		out = append(out, "needs an exitCode above 0 and lines")
	}
	return out
}

var _ = framework.Add(Registry, framework.Claim[BadThresholdRow]{
	Name:  ClaimBadThreshold,
	Title: "Bad threshold values",
	Asserts: "a threshold its Rust type cannot hold, edited into the running deployment, stops the new router Pod with " +
		"clap's value-parser error and exit 2; one out of the policy's range with `Error: InvalidValue {...}` and exit 1; " +
		"never Ready while the previous router Pod keeps serving, then edited back (the router exits before it looks at a " +
		"worker, so the shared deployment's engines show the same as one engine would)",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	// Each value is edited into the pair's shared deployment and back once
	// the refusal is confirmed (framework.Spec.Refuse).
	Cases: func(_ fixtures.Row, r BadThresholdRow) []framework.Case {
		var out []framework.Case
		for _, b := range r.BadThresholds {
			out = append(out, framework.Case{Name: b.Arg, Deployment: &framework.Deployment{RouterArgs: []string{b.Arg}, Refused: true}})
		}
		return out
	},
	Specs: func(input func() framework.Input[BadThresholdRow]) {
		BadThresholdSpec(func() BadThresholdSpecInput {
			in := input()
			return BadThresholdSpecInput{Input: in, Bad: caseOf(in.Case.Name, in.Expect.BadThresholds, func(b BadThreshold) string { return b.Arg })}
		})
	},
})

// BadThresholdSpecInput is the input of BadThresholdSpec.
type BadThresholdSpecInput struct {
	framework.Input[BadThresholdRow]
	// Bad is the row's bad value the case runs (its arg names the case).
	Bad *BadThreshold
}

// Check implements framework.SpecInput.
func (in BadThresholdSpecInput) Check() error {
	return checkCase(in.Spec, "Bad", "badThresholds", in.Bad)
}

// BadThresholdSpec: a threshold value the router refuses stops it at
// startup as the real one does: clap's value-parser error and exit 2 for
// a value its Rust type cannot hold, RouterConfig::validate's error and
// exit 1 for a number out of the policy's range. The previous container's
// log holds the derived lines and the router never becomes Ready: edited
// into the shared deployment, the new router Pod never does while the
// previous one keeps serving, and the value is edited back as soon as that
// is confirmed (created with it under E2E_ISOLATE=1: RouterReady False,
// never Ready, deleted at once).
func BadThresholdSpec(input func() BadThresholdSpecInput) {
	framework.CheckInput("BadThresholdSpec", input)
	var (
		in  BadThresholdSpecInput
		bad BadThreshold
	)
	BeforeEach(func() {
		in = input()
		in.Begin()
		bad = *in.Bad
	})

	It("stops the router at startup with the derived error and exit code, and the router never becomes Ready", func(ctx SpecContext) {
		r := in.Refuse(ctx, func(logs string) error {
			for _, l := range routerlog.Lines(logs) {
				if strings.HasPrefix(l.Text, "error: ") || strings.HasPrefix(l.Text, "Error: ") {
					return nil
				}
			}
			return errors.New("the previous container's log has no error line yet")
		})
		crash := r.RouterCrash
		var errLines []string
		for _, l := range strings.Split(crash.Text, "\n") {
			l = strings.TrimRight(l, "\r")
			if strings.HasPrefix(l, "error: ") || strings.HasPrefix(l, "Error: ") {
				errLines = append(errLines, l)
			}
		}
		recordCrash(in.Spec, bad.Arg, crash, strings.Join(errLines, "\n"))
		in.Record(fmt.Sprintf("%s: exit %d, %q", bad.Arg, bad.ExitCode, bad.Lines[0]),
			fmt.Sprintf("%s: exit %d, %q; %s", bad.Arg, *crash.Pod.LastExitCode, strings.Join(errLines, " | "), r.Words()))

		Expect(crash.Pod).To(assertions.HaveExitedWith(bad.ExitCode), "the router's exit code: %s", bad.Why)
		Expect(crash.Text).To(assertions.HaveLogLines(bad.Lines...), "the previous container's log: %s", bad.Why)
		in.ExpectRefused(ctx, r)
		r.End(ctx)
	})
}
