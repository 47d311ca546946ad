package framework

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/fixtures"
)

// Plan is what a run of the registry's claims creates and in what order,
// computed from the registry and expect.yaml alone: nothing is created and
// no target is asked. The spec tree (Describe) executes it; the README's
// sharing table (make docs) and the cost figures are read from it.
type Plan struct {
	// Isolated: every case gets a deployment of its own (E2E_ISOLATE=1).
	Isolated bool
	Pairs    []PairPlan
}

// PairPlan is one pair's part of the plan.
type PairPlan struct {
	Pair api.Pair
	// Alone are the cases that run outside any shared deployment: on one
	// of their own, created and deleted within the spec, or on none. The
	// spec tree lists them first, in registry order.
	Alone []Use
	// Shared are the deployments cases share, in order of first use: each
	// is an Ordered container whose uses run in order on one process.
	Shared []SharedDeployment
}

// Use is one case of one claim in the plan.
type Use struct {
	Claim Info
	Case  Case
	// Labels are the labels its specs carry, the pair's included: what a
	// Ginkgo label filter selects on.
	Labels []string
	// Own is the deployment the case creates for itself (Alone only).
	Own *PlannedDeployment
}

// SharedDeployment is a deployment and the cases that share it, in the
// order they run: those that mutate it last.
type SharedDeployment struct {
	PlannedDeployment
	Uses []Use
}

// PlannedDeployment is one ModelDeployment the plan creates.
type PlannedDeployment struct {
	// Name is its metadata.name.
	Name string
	Deployment
	// ExtraEnginePods are the Pods its cases start beyond its own (a
	// replacement of a killed one).
	ExtraEnginePods int
}

// Plan computes the plan for pairs (every documented pair when nil).
func (r *Registry) Plan(pairs []api.Pair, isolate bool) Plan {
	if pairs == nil {
		pairs = fixtures.DocumentedPairs
	}
	p := Plan{Isolated: isolate}
	for _, pair := range pairs {
		p.Pairs = append(p.Pairs, r.pairPlan(pair, isolate))
	}
	return p
}

func (r *Registry) pairPlan(p api.Pair, isolate bool) PairPlan {
	out := PairPlan{Pair: p}
	for _, c := range r.ordered() {
		info := c.info()
		ls := append(fixtures.PairLabels(p), labels(c, p)...)
		for _, cs := range c.cases(p) {
			u := Use{Claim: info, Case: cs, Labels: ls}
			d := cs.Deployment
			if d == nil {
				out.Alone = append(out.Alone, u)
				continue
			}
			if isolate || d.Own {
				own := *d
				own.Own = true
				u.Case.Deployment = &own
				u.Own = &PlannedDeployment{Name: ownName(info.Name, cs.Name, p), Deployment: own, ExtraEnginePods: cs.ExtraEnginePods}
				out.Alone = append(out.Alone, u)
				continue
			}
			i := slices.IndexFunc(out.Shared, func(s SharedDeployment) bool { return s.Deployment.sameShape(*d) })
			if i < 0 {
				out.Shared = append(out.Shared, SharedDeployment{PlannedDeployment: PlannedDeployment{Name: sharedName(*d, p), Deployment: *d}})
				i = len(out.Shared) - 1
			}
			out.Shared[i].Uses = append(out.Shared[i].Uses, u)
			out.Shared[i].ExtraEnginePods += cs.ExtraEnginePods
		}
	}
	for i := range out.Shared {
		// Cases that mutate the deployment go last, in registry order: the
		// ones that need its pristine history run before any edit or fault.
		slices.SortStableFunc(out.Shared[i].Uses, func(a, b Use) int {
			switch {
			case a.Claim.Mutates == b.Claim.Mutates:
				return 0
			case b.Claim.Mutates:
				return -1
			}
			return 1
		})
	}
	return out
}

// Deployments lists every ModelDeployment the pair's plan creates, in the
// order the spec tree meets them: those of single cases, then the shared
// ones.
func (pp PairPlan) Deployments() []PlannedDeployment {
	var out []PlannedDeployment
	for _, u := range pp.Alone {
		if u.Own != nil {
			out = append(out, *u.Own)
		}
	}
	for _, s := range pp.Shared {
		out = append(out, s.PlannedDeployment)
	}
	return out
}

// Cost is what a plan starts on a target that runs every pair: each
// ModelDeployment is an image pull, and each engine Pod a model load on a
// GPU.
type Cost struct {
	ModelDeployments int
	EnginePods       int
}

// Cost adds up the plan's deployments, each server deployment with
// replicas engine replicas unless it sets its own.
func (p Plan) Cost(replicas int32) Cost {
	var c Cost
	for _, pp := range p.Pairs {
		for _, d := range pp.Deployments() {
			c.ModelDeployments++
			c.EnginePods += d.EnginePods(replicas) + d.ExtraEnginePods
		}
	}
	return c
}

// Only keeps the uses keep selects (by their claim, or their Labels as a
// label filter would): the plan of a run of those alone.
func (p Plan) Only(keep func(Use) bool) Plan {
	out := Plan{Isolated: p.Isolated}
	for _, pp := range p.Pairs {
		np := PairPlan{Pair: pp.Pair}
		for _, u := range pp.Alone {
			if keep(u) {
				np.Alone = append(np.Alone, u)
			}
		}
		for _, s := range pp.Shared {
			ns := s
			ns.Uses, ns.ExtraEnginePods = nil, 0
			for _, u := range s.Uses {
				if keep(u) {
					ns.Uses = append(ns.Uses, u)
					ns.ExtraEnginePods += u.Case.ExtraEnginePods
				}
			}
			if len(ns.Uses) > 0 {
				np.Shared = append(np.Shared, ns)
			}
		}
		out.Pairs = append(out.Pairs, np)
	}
	return out
}

// sharedTextPrefix starts the text of every shared deployment's container.
const sharedTextPrefix = "on one deployment"

// Text is the shared deployment's container text.
func (d Deployment) Text() string {
	what := sharedTextPrefix
	if d.PD() {
		what = fmt.Sprintf("%s of %d prefill and %d decode replicas", what, d.Prefill, d.Decode)
	} else if d.Replicas > 0 {
		what = fmt.Sprintf("%s of %d replicas", what, d.Replicas)
	}
	if len(d.RouterArgs) == 0 {
		return what + " with the router's defaults"
	}
	return fmt.Sprintf("%s with router args %s", what, strings.Join(d.RouterArgs, " "))
}

// sharedName is a shared deployment's metadata.name: its args and pair
// ("pd-..." for a prefill/decode pair).
func sharedName(d Deployment, p api.Pair) string {
	what := "shared"
	if len(d.RouterArgs) > 0 {
		what = strings.Join(d.RouterArgs, "-")
	}
	if d.PD() {
		what = "pd-" + strings.TrimLeft(what, "-")
	}
	if d.Replicas > 0 {
		what = fmt.Sprintf("r%d-%s", d.Replicas, what)
	}
	return ObjectName(what, p)
}

// ownName is a case's own deployment's name: <claim>[-<case>]-<pair>.
func ownName(claim, caseName string, p api.Pair) string {
	if caseName == "" {
		return ObjectName(claim, p)
	}
	return ObjectName(claim+"-"+caseName, p)
}

// ObjectName is a DNS label for a ModelDeployment: <what>-<pair>, at most
// 40 characters to leave room for the Pods' -server-xxxxx and
// -router-xxxxxxxxxx-xxxxx. A name cut short ends in a hash of the whole
// so that two long names stay apart.
func ObjectName(what string, p api.Pair) string {
	name := DNSLabel(what + "-" + p.Slug())
	if len(name) <= 40 {
		return name
	}
	return strings.TrimRight(name[:34], "-") + "-" + shortHash(name)
}

var notDNS = regexp.MustCompile(`[^a-z0-9]+`)

// DNSLabel makes s a DNS label: lower case, each run of other characters
// one "-".
func DNSLabel(s string) string {
	s = strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}

// shortHash is 5 hex characters of FNV-1a over s.
func shortHash(s string) string {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return fmt.Sprintf("%05x", h&0xfffff)
}
