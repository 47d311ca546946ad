package routing

import (
	"errors"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// ClaimBadThreshold: a cache_aware threshold value the router refuses.
const ClaimBadThreshold = "badthreshold"

// badThresholdReplicas is the engine replicas of a bad-threshold
// deployment: its router exits while parsing or validating its flags,
// before it looks at any worker, so one engine Pod shows the same and
// costs half the accelerators.
const badThresholdReplicas = 1

var _ = register(Claim{
	Name:        ClaimBadThreshold,
	Title:       "Bad threshold values",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		return need(nil, len(e.BadThresholds) > 0, "badthreshold needs badThresholds")
	},
	// Each value is a deployment of its own, deleted as soon as the crash
	// is confirmed: no other claim can use a router that never starts.
	Deployment: nil,
	Spec: func(p api.Pair, input func() Input) {
		describeCases(ClaimBadThreshold, p, "any threshold", badThresholdArgs, func(arg string) {
			BadThresholdSpec(func() BadThresholdSpecInput { return BadThresholdSpecInput{Input: input(), Arg: arg} })
		})
	},
})

// BadThresholdSpecInput is the input of BadThresholdSpec.
type BadThresholdSpecInput struct {
	Input
	// Arg is the --flag=value to refuse ("" for a pair the claim does not
	// apply to: the spec skips with the reason).
	Arg string
}

// BadThresholdSpec: a threshold value the router refuses stops it at
// startup as the real one does: clap's value-parser error and exit 2 for
// a value its Rust type cannot hold, RouterConfig::validate's error and
// exit 1 for a number out of the policy's range. The previous container's
// log holds the derived lines, RouterReady is False and the deployment
// never becomes Ready; it is deleted as soon as that is confirmed.
func BadThresholdSpec(input func() BadThresholdSpecInput) {
	const spec = ClaimBadThreshold
	var (
		in  BadThresholdSpecInput
		bad fixtures.BadThreshold
	)
	BeforeEach(func() {
		in = input()
		exp := in.begin("BadThresholdSpec", ClaimBadThreshold)
		bad = findCase(exp.BadThresholds, func(b fixtures.BadThreshold) string { return b.Arg }, in.Arg, "badThresholds arg", in.Pair)
	})

	It("stops the router at startup with the derived error and exit code, and the deployment never becomes Ready", func(ctx SpecContext) {
		own := in.own(in.Pair, objectName("bt"+bad.Flag()+"-"+bad.Value(), in.Pair), bad.Arg)
		own.Replicas = badThresholdReplicas
		dep, err := own.Create(ctx, in.Target, spec)
		Expect(err).NotTo(HaveOccurred(), "creating %s", own.Name)

		crash := in.awaitCrash(ctx, spec, dep, func(logs string) error {
			for _, l := range routerlog.Lines(logs) {
				if strings.HasPrefix(l.Text, "error: ") || strings.HasPrefix(l.Text, "Error: ") {
					return nil
				}
			}
			return errors.New("the previous container's log has no error line yet")
		})
		var lines, errLines []string
		for _, l := range strings.Split(crash.Text, "\n") {
			l = strings.TrimRight(l, "\r")
			lines = append(lines, l)
			if strings.HasPrefix(l, "error: ") || strings.HasPrefix(l, "Error: ") {
				errLines = append(errLines, l)
			}
		}
		code := *crash.Pod.LastExitCode
		report.Record(report.RouterExit{Claim: spec, Pair: in.Pair.String(), Value: bad.Arg, ExitCode: crash.Pod.LastExitCode,
			Restarts: crash.Pod.Restarts, Ready: crash.Pod.Ready, RouterReady: crash.RouterReady, Stderr: strings.Join(errLines, "\n")})
		report.Record(report.Claim{Claim: spec, Pair: in.Pair.String(),
			Expected: fmt.Sprintf("%s: exit %d, %q", bad.Arg, bad.ExitCode, bad.Lines[0]),
			Measured: fmt.Sprintf("%s: exit %d, %q, RouterReady %s", bad.Arg, code, strings.Join(errLines, " | "), crash.RouterReady)})

		Expect(code).To(BeEquivalentTo(bad.ExitCode), "the router's exit code: %s", bad.Why)
		Expect(lines).To(ContainElements(bad.Lines), "the previous container's log: %s", bad.Why)
		in.expectNeverReady(ctx, spec, dep)
		own.Release(ctx, in.Target)
	})
}

// badThresholdArgs are the refused args of a row.
func badThresholdArgs(e fixtures.Expectation) []string {
	var out []string
	for _, b := range e.BadThresholds {
		out = append(out, b.Arg)
	}
	return out
}
