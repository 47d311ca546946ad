package routing

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// ClaimAdmission: the flags the operator owns are refused at creation.
const ClaimAdmission = "admission"

var _ = register(Claim{
	Name:  ClaimAdmission,
	Title: "Admission",
	Require: func(e fixtures.Expectation) []string {
		return need(nil, e.Admission != nil && len(e.Admission.Refused) > 0, "admission needs refused flags")
	},
	// The "admitted" check creates with the first admitted args; with
	// --policy round_robin that is the round-robin deployment, so the
	// check is its creation.
	Deployment: func(e fixtures.Expectation) ([]string, bool) {
		if e.Admission == nil || len(e.Admission.Admitted) == 0 {
			return nil, false
		}
		return e.Admission.Admitted[0], true
	},
	Spec: func(_ api.Pair, input func() Input) {
		AdmissionSpec(func() AdmissionSpecInput { return AdmissionSpecInput{Input: input()} })
	},
})

// AdmissionSpecInput is the input of AdmissionSpec.
type AdmissionSpecInput struct {
	Input
}

// AdmissionSpec: every router flag the operator sets itself is refused at
// creation, as `--flag value` and as `--flag=value`, with a message naming
// the flag; --policy is admitted; an engine the router does not front is
// refused. Refusals happen before anything runs, so a pair the target cannot
// run is still checked (only the admitted create needs a runnable pair).
// An admitted create with input.Deployment's router args is that
// deployment's creation.
func AdmissionSpec(input func() AdmissionSpecInput) {
	const spec = ClaimAdmission
	var (
		in  AdmissionSpecInput
		adm fixtures.Admission
	)
	BeforeEach(func() {
		in = input()
		in.check("AdmissionSpec")
		adm = *expectation(ClaimAdmission, in.Pair).Admission
		in.requireConfigured(in.Pair)
	})

	It("refuses every flag the operator owns, in both forms, naming the flag", func(ctx SpecContext) {
		var wrong []string
		refused := 0
		for _, flag := range adm.Refused {
			for _, args := range [][]string{{flag, "1"}, {flag + "=1"}} {
				want := fixtures.RefusalMessage(flag, in.Pair.Router)
				// Admitted by mistake, it is deleted when the spec ends.
				_, err := in.own(in.Pair, objectName("admission", in.Pair), args...).Create(ctx, in.Target, spec)
				entry := report.Admission{Claim: ClaimAdmission, Pair: in.Pair.String(), Args: args}
				var ae *clusters.AdmissionError
				switch {
				case err == nil:
					wrong = append(wrong, fmt.Sprintf("%q was admitted", strings.Join(args, " ")))
				case !errors.As(err, &ae):
					wrong = append(wrong, fmt.Sprintf("%q failed without an admission refusal: %v", strings.Join(args, " "), err))
				default:
					entry.Refused, entry.Field, entry.Message = true, ae.Field, ae.Message
					switch {
					case !strings.Contains(ae.Message, want):
						wrong = append(wrong, fmt.Sprintf("%q refused with %q, documented %q", strings.Join(args, " "), ae.Message, want))
					case ae.Field != "" && ae.Field != "spec.router.extraArgs[0]":
						wrong = append(wrong, fmt.Sprintf("%q refused on field %s, not spec.router.extraArgs[0]", strings.Join(args, " "), ae.Field))
					default:
						refused++
					}
				}
				report.Record(entry)
			}
		}
		report.Record(report.Claim{Claim: ClaimAdmission, Pair: in.Pair.String(),
			Expected: fmt.Sprintf("%d owned flags refused in both forms (%d creates)", len(adm.Refused), 2*len(adm.Refused)),
			Measured: fmt.Sprintf("%d of %d creates refused with the documented message", refused, 2*len(adm.Refused))})
		Expect(wrong).To(BeEmpty())
	})

	It("admits the flags it does not own, such as --policy", Label(LabelNeedsGPU), func(ctx SpecContext) {
		if len(adm.Admitted) == 0 {
			Skip("the documentation names no admitted flag for " + in.Pair.Router)
		}
		in.requireRunnable(in.Pair)
		for _, args := range adm.Admitted {
			d := in.Deployment
			if d == nil || !slices.Equal(d.RouterArgs, args) {
				d = in.own(in.Pair, objectName("admitted", in.Pair), args...)
			}
			_, err := d.Create(ctx, in.Target, spec)
			report.Record(report.Admission{Claim: ClaimAdmission, Pair: in.Pair.String(), Args: args, Refused: err != nil, Message: errText(err)})
			Expect(err).NotTo(HaveOccurred(), "creating with router args %q", args)
			report.Record(report.Claim{Claim: ClaimAdmission, Pair: in.Pair.String(),
				Expected: fmt.Sprintf("%q admitted", strings.Join(args, " ")), Measured: fmt.Sprintf("%q admitted", strings.Join(args, " "))})
		}
	})

	It("refuses an engine the router does not front", func(ctx SpecContext) {
		if adm.Mismatch == nil {
			Skip(in.Pair.Router + " fronts every engine")
		}
		if _, ok := in.Config.Engine(adm.Mismatch.Engine); !ok {
			Skip(fmt.Sprintf("engine %s is not configured in %s", adm.Mismatch.Engine, in.Config.File()))
		}
		wrongPair := api.Pair{Router: in.Pair.Router, Engine: adm.Mismatch.Engine}
		_, err := in.own(wrongPair, objectName("mismatch", wrongPair)).Create(ctx, in.Target, spec)
		report.Record(report.Admission{Claim: ClaimAdmission, Pair: in.Pair.String(), Args: []string{"engine " + adm.Mismatch.Engine},
			Refused: err != nil, Message: errText(err)})
		report.Record(report.Claim{Claim: ClaimAdmission, Pair: in.Pair.String(), Expected: adm.Mismatch.Message, Measured: errText(err)})
		var ae *clusters.AdmissionError
		Expect(errors.As(err, &ae)).To(BeTrue(), "%s in front of %s must be refused by admission; got %v", in.Pair.Router, adm.Mismatch.Engine, err)
		Expect(ae.Message).To(ContainSubstring(adm.Mismatch.Message))
	})
}

func errText(err error) string {
	if err == nil {
		return "admitted"
	}
	var ae *clusters.AdmissionError
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}
