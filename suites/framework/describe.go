package framework

import (
	"os"
	"slices"

	. "github.com/onsi/ginkgo/v2"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

// Isolated reads E2E_ISOLATE (config.Isolated): set to a true value, it
// gives every case a deployment of its own again instead of sharing one per
// pair and router args, for debugging a claim without the history of the
// others. Unset or empty is false.
func Isolated() (bool, error) { return config.Isolated(os.LookupEnv) }

// Describe defines the whole spec tree from the registry's plan: a
// container per documented pair (labelled router:, engine:) holding, per
// claim, a container with the claim's labels and, per case, its specs.
// Each shared deployment is an Ordered, ContinueOnFailure container whose
// cases run in the plan's order on one process, the longest first: the
// first spec that needs the deployment creates it (after its own skips),
// each later one edits its router args when its case needs others,
// DeferCleanup from BeforeAll deletes it after the last, and each spec's
// failure is its own. The cases that run alone come after. target is read
// when a spec starts, after the suite set it up.
func (r *Registry) Describe(target func() Target) bool {
	for _, p := range fixtures.DocumentedPairs {
		Describe(p.String(), Label(fixtures.PairLabels(p)...), func() {
			isolate, _ := Isolated() // a bad value fails the suite in its setup
			r.describePair(r.pairPlan(p, isolate), target)
		})
	}
	return true
}

func (r *Registry) describePair(pp PairPlan, target func() Target) {
	byName := map[string]registered{}
	for _, c := range r.ordered() {
		byName[c.info().Name] = c
	}
	// Uses of one claim side by side share its container.
	describeUses := func(uses []Use, deployment func(Use) *PairDeployment) {
		for i := 0; i < len(uses); {
			j := i
			for j < len(uses) && uses[j].Claim.Name == uses[i].Claim.Name {
				j++
			}
			r.describeClaim(byName[uses[i].Claim.Name], pp.Pair, uses[i:j], target, deployment)
			i = j
		}
	}
	// The longest shared deployment first, and before the cases that run
	// alone: its cases run in a row on one process, so the run can end no
	// sooner than it does; a priority of its length lets Ginkgo start it
	// (and the pair holding it) before shorter work, on every process.
	shared := slices.Clone(pp.Shared)
	slices.SortStableFunc(shared, func(a, b SharedDeployment) int { return len(b.Uses) - len(a.Uses) })
	for _, s := range shared {
		d := NewPairDeployment(pp.Pair, s.Deployment, s.Name)
		first := s.Uses[0].Claim.Name
		Describe(s.Deployment.Text(), Ordered, ContinueOnFailure, SpecPriority(len(s.Uses)), func() {
			BeforeAll(func() {
				t := target()
				// Runs after the container's last spec, failed or not.
				DeferCleanup(func(ctx SpecContext) { d.Release(ctx, t) }, NodeTimeout(IntervalOf(t.Config, first, config.OpWaitDeleted).Timeout.D()))
			})
			describeUses(s.Uses, func(Use) *PairDeployment { return d })
		})
	}
	describeUses(pp.Alone, func(u Use) *PairDeployment {
		if u.Own == nil {
			return nil
		}
		// A fresh one for every spec: created when it asks, deleted when it ends.
		return NewPairDeployment(pp.Pair, u.Own.Deployment, u.Own.Name)
	})
}
