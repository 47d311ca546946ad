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
	// Shared are the deployments cases share, one per shape (the
	// configured servers, a prefill/decode pair) in order of first use:
	// each is an Ordered container whose uses run in order on one process,
	// each with its own router args.
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
// order they run (runOrder): those that mutate it last, those with the
// same router args side by side. Its RouterArgs are the ones it is created
// with; Steps says where they are edited.
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
				// Created with the case's args, refused ones included: a
				// router that never starts is then a creation that never
				// becomes Ready.
				own := *d
				own.Own = true
				u.Case.Deployment = &own
				u.Own = &PlannedDeployment{Name: ownName(info.Name, cs.Name, p), Deployment: own, ExtraEnginePods: cs.ExtraEnginePods}
				out.Alone = append(out.Alone, u)
				continue
			}
			i := slices.IndexFunc(out.Shared, func(s SharedDeployment) bool { return s.Deployment.sameShape(*d) })
			if i < 0 {
				shape := Deployment{Prefill: d.Prefill, Decode: d.Decode, Replicas: d.Replicas}
				out.Shared = append(out.Shared, SharedDeployment{PlannedDeployment: PlannedDeployment{Name: sharedName(shape, p), Deployment: shape}})
				i = len(out.Shared) - 1
			}
			out.Shared[i].Uses = append(out.Shared[i].Uses, u)
		}
	}
	for i := range out.Shared {
		out.Shared[i].Uses = runOrder(out.Shared[i].Uses)
		out.Shared[i].settle()
	}
	return out
}

// runOrder is the order a shared deployment's uses run in: those that
// mutate it (edit or fault it and put it back) after every one that does
// not, so the ones that read its history see none of that; within each,
// uses with the same router args side by side, in the order their args
// first appear in the registry, so that each set of args costs one edit.
// No outcome depends on this order (see the package documentation); it
// only keeps the edits few.
func runOrder(uses []Use) []Use {
	key := func(u Use) string {
		return fmt.Sprintf("%t\x00%t\x00%s", u.Claim.Mutates, u.Case.Deployment.Refused, strings.Join(u.Case.Deployment.RouterArgs, "\x00"))
	}
	first := map[string]int{}
	for i, u := range uses {
		if _, ok := first[key(u)]; !ok {
			first[key(u)] = i
		}
	}
	out := slices.Clone(uses)
	slices.SortStableFunc(out, func(a, b Use) int {
		switch {
		case a.Claim.Mutates != b.Claim.Mutates && b.Claim.Mutates:
			return -1
		case a.Claim.Mutates != b.Claim.Mutates:
			return 1
		}
		return first[key(a)] - first[key(b)]
	})
	return out
}

// settle sets what follows from the uses: the router args the deployment
// is created with (the first use's that the router accepts; its defaults
// when every use's are refused) and the engine Pods its uses start beyond
// its own.
func (s *SharedDeployment) settle() {
	s.RouterArgs, s.ExtraEnginePods = nil, 0
	created := false
	for _, u := range s.Uses {
		s.ExtraEnginePods += u.Case.ExtraEnginePods
		if !created && !u.Case.Deployment.Refused {
			s.RouterArgs, created = slices.Clone(u.Case.Deployment.RouterArgs), true
		}
	}
}

// Step is one use of a shared deployment with what the framework does to
// its router args first.
type Step struct {
	Use
	// Edit: spec.router.extraArgs is edited to the use's args before it
	// runs (a new router Pod); false: it runs on the args it finds.
	Edit bool
	// EditBack: the use's args are refused; it edits them in and back to
	// the ones it found (no new router Pod stays).
	EditBack bool
}

// Steps walks the uses in order with the router args each finds: where
// the framework edits them (Edit) and where a refused value is edited in
// and back (EditBack). The claims' own edits (Mutates) put back what they
// found, so they change nothing here.
func (s SharedDeployment) Steps() []Step {
	cur := s.RouterArgs
	var out []Step
	for _, u := range s.Uses {
		st := Step{Use: u}
		switch args := u.Case.Deployment.RouterArgs; {
		case u.Case.Deployment.Refused:
			st.EditBack = true
		case !slices.Equal(args, cur):
			st.Edit, cur = true, args
		}
		out = append(out, st)
	}
	return out
}

// Edits counts the edits of spec.router.extraArgs the framework makes on
// the deployment: one per change of args, two (in and back) per refused
// value.
func (s SharedDeployment) Edits() int {
	n := 0
	for _, st := range s.Steps() {
		switch {
		case st.Edit:
			n++
		case st.EditBack:
			n += 2
		}
	}
	return n
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
	// RouterEdits are the framework's edits of spec.router.extraArgs: a
	// router Pod each, no engine Pod.
	RouterEdits int
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
		for _, s := range pp.Shared {
			c.RouterEdits += s.Edits()
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
			ns.Uses = nil
			for _, u := range s.Uses {
				if keep(u) {
					ns.Uses = append(ns.Uses, u)
				}
			}
			if len(ns.Uses) > 0 {
				ns.settle()
				np.Shared = append(np.Shared, ns)
			}
		}
		out.Pairs = append(out.Pairs, np)
	}
	return out
}

// sharedTextPrefix starts the text of every shared deployment's container.
const sharedTextPrefix = "on one deployment"

// Text is the shared deployment's container text: its shape (its router
// args change from case to case).
func (d Deployment) Text() string {
	what := sharedTextPrefix
	switch {
	case d.PD():
		what = fmt.Sprintf("%s of %d prefill and %d decode replicas", what, d.Prefill, d.Decode)
	case d.Replicas > 0:
		what = fmt.Sprintf("%s of %d replicas", what, d.Replicas)
	}
	return what
}

// sharedName is a shared deployment's metadata.name: its shape and pair
// ("shared-<pair>" for the configured servers, "pd<P>x<D>-<pair>" for a
// prefill/decode pair, "r<N>-..." with its own replicas).
func sharedName(d Deployment, p api.Pair) string {
	what := "shared"
	if d.PD() {
		what = fmt.Sprintf("pd%dx%d", d.Prefill, d.Decode)
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
