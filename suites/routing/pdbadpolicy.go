package routing

import (
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimPDBadPolicy: an unknown --prefill-policy or --decode-policy stops
// the router of a prefill/decode pair at startup with clap's error for
// that flag, exactly as a bad --policy does: clap checks the per-pool
// flags' values before any mode decides whether to use them.
const ClaimPDBadPolicy = "pdbadpolicy"

// PDBadPolicyRow is what pdbadpolicy's rows state: the pair each bad value
// is created on, and the refusal.
type PDBadPolicyRow struct {
	PD        PDShape   `json:"pd"`
	BadPolicy BadPolicy `json:"badPolicy"`
}

var _ = framework.Add(Registry, framework.Claim[PDBadPolicyRow]{
	Name:  ClaimPDBadPolicy,
	Title: "Bad per-pool policy",
	Asserts: "an unknown `--prefill-policy` or `--decode-policy` stops the router of a 1+1 pair with " +
		"clap's error for that flag and exit 2, RouterReady False, never Ready",
	PD:     true,
	Labels: []string{"policy:invalid", framework.LabelNeedsGPU},
	// Each bad value is a pair of its own, deleted as soon as the crash is
	// confirmed (BadPolicySpec).
	Cases: func(_ fixtures.Row, r PDBadPolicyRow) []framework.Case { return r.BadPolicy.cases(&r.PD) },
	Specs: func(input func() framework.Input[PDBadPolicyRow]) {
		BadPolicySpec(func() BadPolicySpecInput {
			in := input()
			return BadPolicySpecInput{Spec: in.Spec, BadPolicy: in.Expect.BadPolicy}
		})
	},
})
