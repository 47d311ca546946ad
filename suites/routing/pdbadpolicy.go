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
	Asserts: "an unknown `--prefill-policy` or `--decode-policy`, edited into the pair's running prefill/decode " +
		"deployment, stops the new router Pod with clap's error for that flag and exit 2, never Ready while the previous " +
		"router Pod keeps serving, then edited back",
	PD:     true,
	Labels: []string{"policy:invalid", fixtures.LabelNeedsGPU},
	// Each bad value is edited into the prefill/decode deployment of the
	// row's shape and back (BadPolicySpec): the router exits while parsing
	// its flags, before it looks at a worker, so the pool sizes do not
	// matter and the shape the other prefill/decode claims use serves.
	Cases: func(_ fixtures.Row, r PDBadPolicyRow) []framework.Case { return r.BadPolicy.cases(&r.PD) },
	Specs: func(input func() framework.Input[PDBadPolicyRow]) {
		BadPolicySpec(func() BadPolicySpecInput {
			in := input()
			return BadPolicySpecInput{Spec: in.Spec, BadPolicy: in.Expect.BadPolicy, Value: in.Expect.BadPolicy.value(in.Case.Name)}
		})
	},
})
