package routing

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimAdmission: the router flags the operator sets itself are refused at
// creation, the ones it does not own are admitted, and an engine the
// router does not front is refused.
const ClaimAdmission = "admission"

// AdmissionRow is what admission's rows state.
type AdmissionRow struct {
	Admission Admission `json:"admission"`
}

// Admission is what the webhook refuses and admits for a router.
type Admission struct {
	// Refused are the flags the operator owns, as bare --names.
	Refused []string `json:"refused"`
	// Admitted are router args admitted as given.
	Admitted [][]string `json:"admitted,omitempty"`
	// Mismatch is an engine the router does not front.
	Mismatch *Mismatch `json:"mismatch,omitempty"`
}

// Check implements yamlbind.Checker.
func (a Admission) Check() []string {
	var out []string
	if len(a.Refused) == 0 {
		out = append(out, "refused must list the flags the operator owns")
	}
	for _, f := range a.Refused {
		if !strings.HasPrefix(f, "--") || strings.Contains(f, "=") {
			out = append(out, fmt.Sprintf("refused flag %q must be a bare --name", f))
		}
	}
	return out
}

// Mismatch is an engine the router does not front, and the refusal message.
type Mismatch struct {
	Engine  string `json:"engine"`
	Message string `json:"message"`
}

// RefusalMessage is the webhook's message for an owned flag (docs/operator.md#owned-router-flags).
func RefusalMessage(flag, router string) string {
	return fmt.Sprintf("%q is set by the operator for router %q and must not be supplied here, because two values for it cannot be told apart", flag, router)
}

var _ = framework.Add(Registry, framework.Claim[AdmissionRow]{
	Name:  ClaimAdmission,
	Title: "Admission",
	Asserts: "every operator-owned router flag, as `--flag v` and `--flag=v`, is refused with a message naming it; " +
		"`--policy` is admitted; a router that does not front the engine is refused",
	// The "admitted" check brings the shared deployment to the first
	// admitted args: its creation with them, or an edit to them, each a
	// request the webhook answers. Refusals create nothing that runs.
	Cases: func(_ fixtures.Row, r AdmissionRow) []framework.Case {
		if len(r.Admission.Admitted) == 0 {
			return []framework.Case{{}}
		}
		return []framework.Case{{Deployment: framework.Shared(r.Admission.Admitted[0])}}
	},
	Specs: AdmissionSpec,
})

// AdmissionSpec: every router flag the operator sets itself is refused at
// creation, as `--flag value` and as `--flag=value`, with a message naming
// the flag; --policy is admitted; an engine the router does not front is
// refused. Refusals happen before anything runs, so a pair the target cannot
// run is still checked (only the admitted args need a runnable pair). The
// admitted args are brought onto input.Deployment, the pair's shared
// deployment: by its creation, or by an edit of spec.router.extraArgs, which
// the webhook admits or refuses as it does a create.
func AdmissionSpec(input func() framework.Input[AdmissionRow]) {
	framework.CheckInput("AdmissionSpec", input)
	var (
		in  framework.Input[AdmissionRow]
		adm Admission
	)
	BeforeEach(func() {
		in = input()
		in.SkipIfNotApplicable()
		adm = in.Expect.Admission
		in.RequireConfigured(in.Pair)
	})

	It("refuses every flag the operator owns, in both forms, naming the flag", func(ctx SpecContext) {
		var creates []assertions.Create
		for _, flag := range adm.Refused {
			for _, args := range [][]string{{flag, "1"}, {flag + "=1"}} {
				// Admitted by mistake, it is deleted when the spec ends.
				_, err := framework.Throwaway(in.Pair, "admission", args...).Create(ctx, in.Target, in.Claim)
				c := assertions.Create{Args: args, Want: RefusalMessage(flag, in.Pair.Router), Message: errText(err)}
				var ae *clusters.AdmissionError
				if errors.As(err, &ae) {
					c.Refused, c.Field, c.Message = true, ae.Field, ae.Message
				}
				report.Record(report.Admission{Claim: in.Claim, Pair: in.Pair.String(), Args: args, Refused: c.Refused, Field: c.Field, Message: c.Message})
				creates = append(creates, c)
			}
		}
		refused := 0
		for _, c := range creates {
			if c.Refused && strings.Contains(c.Message, c.Want) {
				refused++
			}
		}
		in.Record(fmt.Sprintf("%d owned flags refused in both forms (%d creates)", len(adm.Refused), 2*len(adm.Refused)),
			fmt.Sprintf("%d of %d creates refused with the documented message", refused, len(creates)))
		Expect(creates).To(assertions.HaveEachBeenRefused("spec.router.extraArgs[0]"))
	})

	It("admits the flags it does not own, such as --policy", Label(fixtures.LabelNeedsGPU), func(ctx SpecContext) {
		if len(adm.Admitted) == 0 {
			Skip("the documentation names no admitted flag for " + in.Pair.Router)
		}
		in.RequireRunnable(in.Pair)
		for _, args := range adm.Admitted {
			var err error
			if d := in.Deployment; d != nil && in.Case.Deployment != nil && slices.Equal(in.Case.Deployment.RouterArgs, args) {
				_, err = d.Use(ctx, in.Target, in.Claim, args)
			} else {
				_, err = framework.Throwaway(in.Pair, "admitted", args...).Create(ctx, in.Target, in.Claim)
			}
			report.Record(report.Admission{Claim: in.Claim, Pair: in.Pair.String(), Args: args, Refused: err != nil, Message: errText(err)})
			Expect(err).NotTo(HaveOccurred(), "creating with router args %q", args)
			in.Record(fmt.Sprintf("%q admitted", strings.Join(args, " ")), fmt.Sprintf("%q admitted", strings.Join(args, " ")))
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
		_, err := framework.Throwaway(wrongPair, "mismatch").Create(ctx, in.Target, in.Claim)
		report.Record(report.Admission{Claim: in.Claim, Pair: in.Pair.String(), Args: []string{"engine " + adm.Mismatch.Engine},
			Refused: err != nil, Message: errText(err)})
		in.Record(adm.Mismatch.Message, errText(err))
		c := assertions.Create{Args: []string{"engine: " + adm.Mismatch.Engine}, Want: adm.Mismatch.Message, Message: errText(err)}
		var ae *clusters.AdmissionError
		if errors.As(err, &ae) {
			c.Refused, c.Field, c.Message = true, "", ae.Message
		}
		Expect([]assertions.Create{c}).To(assertions.HaveEachBeenRefused("spec.engine"), "%s in front of %s", in.Pair.Router, adm.Mismatch.Engine)
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
