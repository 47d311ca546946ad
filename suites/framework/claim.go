package framework

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/fixtures"
)

// Claim is one row of a suite's registry: a claim, the type of its rows in
// fixtures/expect.yaml, and how the suite runs it. Its name is the claim's
// one name everywhere: the claims[].name of expect.yaml, the feature:<name>
// label, the <name>/<op> interval keys of e2e.yaml, the claim's file
// <name>.go and its row of the README's claims table.
//
// R is the claim's row type: the fields its rows hold beyond the common
// fixtures.Row, each documented where the type is declared. A row binds to
// it strictly (fixtures.RowEntry.Decode): an unknown key is an error, a
// field without ",omitempty" must be set on every applicable row, and a
// value with a Check method is checked. The spec gets its pair's row as
// in.Expect.
type Claim[R any] struct {
	Name string
	// Title is the text of the claim's container in the spec tree.
	Title string
	// Asserts says in Markdown what the claim's specs assert: the README's
	// claims table shows it (make docs).
	Asserts string
	// PD is a claim run on prefill/decode pairs (topology:pd instead of
	// topology:server).
	PD bool
	// Labels are the claim's labels besides claim:<kind> (its claims
	// entry's kind in expect.yaml), topology:server (or topology:pd) and
	// feature:<name>.
	Labels []string
	// Mutates: the claim's specs change the deployment they share (an
	// edit, a fault) and leave it as created. They run after every claim
	// of their deployment that does not, so no earlier outcome can see them.
	Mutates bool
	// PolicyLabel adds policy:<the --policy of the row's routerArgs, else
	// the router's default> to each pair's container.
	PolicyLabel bool
	// Cases lists the claim's cases for one pair's applicable row, with the
	// deployment each runs against. Nil: one case, on the shared deployment
	// created with the row's routerArgs (OneCase).
	Cases func(row fixtures.Row, exp R) []Case
	// Specs defines one case's specs (the claim's spec function, with its
	// own input built from the common one). The case is in.Case.
	Specs func(input func() Input[R])
}

// Info is what the registry, the plan and the docs know of a claim
// whatever its row type.
type Info struct {
	Name, Title, Asserts string
	PD, Mutates          bool
	PolicyLabel          bool
	Labels               []string
	// Kind is the claims entry's kind in expect.yaml.
	Kind string
}

// Case is one case of a claim for one pair: a container of its own in the
// spec tree (unless it is the claim's only one, named ""), and the
// deployment its specs run against.
type Case struct {
	// Name is the case's name, the text of its container; "" for a claim
	// with one case.
	Name string
	// Deployment is what the case's specs run against; nil: they create
	// nothing that runs (admission's refusals).
	Deployment *Deployment
	// ExtraEnginePods are engine Pods the case starts beyond its
	// deployment's (killengine's replacement of the Pod it kills).
	ExtraEnginePods int
}

// Deployment is a ModelDeployment of a pair as a case needs it: its shape
// and the router args the case runs with. Cases of one pair and shape share
// one deployment whatever their args: a case whose args differ edits
// spec.router.extraArgs before it runs (see the package documentation).
type Deployment struct {
	RouterArgs []string
	// Prefill and Decode, when set, make it a prefill/decode pair of that
	// many replicas each instead of the configured servers.
	Prefill, Decode int32
	// Replicas, when > 0, overrides the configured engine replicas of a
	// server deployment.
	Replicas int32
	// Refused: the router refuses RouterArgs at startup (a bad value). On a
	// shared deployment the case edits them in and, once the refusal is
	// confirmed, back (Spec.Refuse); a shared deployment is never created
	// with them.
	Refused bool
	// Own: created for the case's spec alone and deleted when it ends,
	// never shared (E2E_ISOLATE=1 gives every case one).
	Own bool
}

// Shared is a case on the pair's shared server deployment, run with args.
func Shared(args []string) *Deployment { return &Deployment{RouterArgs: slices.Clone(args)} }

// OneCase is the Cases of a claim with one case on the shared deployment,
// run with its row's routerArgs.
func OneCase(row fixtures.Row) []Case { return []Case{{Deployment: Shared(row.RouterArgs)}} }

// PD reports whether d is a prefill/decode pair.
func (d Deployment) PD() bool { return d.Prefill > 0 || d.Decode > 0 }

// sameShape reports whether two deployments can be one: the same roles and
// replicas. Router args do not matter: an edit changes them.
func (d Deployment) sameShape(o Deployment) bool {
	return d.Prefill == o.Prefill && d.Decode == o.Decode && d.Replicas == o.Replicas
}

// EnginePods is how many engine Pods the deployment starts when a server
// deployment has replicas engine replicas.
func (d Deployment) EnginePods(replicas int32) int {
	switch {
	case d.PD():
		return int(d.Prefill + d.Decode)
	case d.Replicas > 0:
		return int(d.Replicas)
	}
	return int(replicas)
}

// Registry is a suite's claims. Each claim's file adds its row with Add;
// the registry reads every claim's expect.yaml rows into its row type once,
// and builds the plan and the spec tree from them.
type Registry struct {
	// Expect is the expect.yaml the rows are read from; nil: the
	// repository's (fixtures.Expectations).
	Expect *fixtures.ExpectFile

	claims []registered
	once   sync.Once
	file   *fixtures.ExpectFile
	errs   []string

	// invalid is what CheckInput found wrong with the inputs built with
	// the tree.
	invalidMu sync.Mutex
	invalid   []string
}

// registered is a Claim whatever its row type.
type registered interface {
	info() Info
	// read binds the claim's rows of f; it returns what is wrong.
	read(f *fixtures.ExpectFile) []string
	// cases are the claim's cases for p, read from its row.
	cases(p api.Pair) []Case
	// describe defines the specs of one case for p; base builds the common
	// part of its input when a spec starts.
	describe(p api.Pair, c Case, base func() Spec)
	row(p api.Pair) fixtures.Row
}

// Add registers c in r. It returns true, so that a claim's file can
// register with a package-level var.
func Add[R any](r *Registry, c Claim[R]) bool {
	r.claims = append(r.claims, &claim[R]{Claim: c, rows: map[api.Pair]readRow[R]{}})
	return true
}

// claim is a registered Claim and its rows as read.
type claim[R any] struct {
	Claim[R]
	kind string
	rows map[api.Pair]readRow[R]
}

// readRow is one pair's row: its common part, the claim's own fields, and
// what kept it from being read.
type readRow[R any] struct {
	fixtures.Row
	exp R
	err error
}

// typedRow is what a row binds to: the common fields beside the claim's.
type typedRow[R any] struct {
	fixtures.Row
	Expect R `json:",inline"`
}

func (c *claim[R]) info() Info {
	return Info{Name: c.Name, Title: c.Title, Asserts: c.Asserts, PD: c.PD, Mutates: c.Mutates, PolicyLabel: c.PolicyLabel,
		Labels: slices.Clone(c.Labels), Kind: c.kind}
}

func (c *claim[R]) read(f *fixtures.ExpectFile) []string {
	entry, ok := f.Claim(c.Name)
	if !ok {
		return []string{fmt.Sprintf("%s: no claims entry named %q for the registered claim %q; add one with a row per pair", fixtures.ExpectPath, c.Name, c.Title)}
	}
	c.kind = entry.ClaimKind()
	var errs []string
	for _, e := range entry.Rows {
		p, err := api.ParsePair(e.Pair)
		if err != nil {
			continue // the file's own check names it
		}
		var t typedRow[R]
		err = e.Decode(&t)
		if err != nil {
			errs = append(errs, err.Error())
		}
		c.rows[p] = readRow[R]{Row: e.Row, exp: t.Expect, err: err}
	}
	return errs
}

func (c *claim[R]) row(p api.Pair) fixtures.Row { return c.rows[p].Row }

func (c *claim[R]) cases(p api.Pair) []Case {
	r, ok := c.rows[p]
	if !ok || r.err != nil || r.NotApplicable != "" {
		// One case without a deployment: the spec skips (or fails) on its own.
		return []Case{{}}
	}
	if c.Cases == nil {
		return OneCase(r.Row)
	}
	cs := c.Cases(r.Row, r.exp)
	if len(cs) == 0 {
		return []Case{{}}
	}
	return cs
}

func (c *claim[R]) describe(p api.Pair, cs Case, base func() Spec) {
	c.Specs(func() Input[R] {
		in := Input[R]{Spec: base()}
		r := c.rows[p]
		in.Row, in.rowErr, in.Expect = r.Row, r.err, r.exp
		if _, ok := c.rows[p]; !ok {
			in.rowErr = fmt.Errorf("%s: claim %q has no row for %s", fixtures.ExpectPath, c.Name, p)
		}
		return in
	})
}

// load reads expect.yaml and every claim's rows, once.
func (r *Registry) load() {
	r.once.Do(func() {
		f := r.Expect
		if f == nil {
			var err error
			if f, err = fixtures.Expectations(); err != nil {
				r.errs = []string{err.Error()}
				r.file = &fixtures.ExpectFile{}
				return
			}
		}
		r.file = f
		names := map[string]bool{}
		for _, c := range r.claims {
			name := c.info().Name
			if names[name] {
				r.errs = append(r.errs, fmt.Sprintf("claim %q is registered twice", name))
			}
			names[name] = true
			r.errs = append(r.errs, c.read(f)...)
		}
		for i, c := range f.Claims {
			if !names[c.Name] {
				r.errs = append(r.errs, fmt.Sprintf("%s: claims[%d] (%s) has no registered claim; add %s.go with its row type, spec function and registry row", fixtures.ExpectPath, i, c.Name, c.Name))
			}
		}
	})
}

// Check reports what keeps the registry and expect.yaml from agreeing: a
// registered claim without a claims entry or the other way round, a claim
// registered twice, and every row that does not bind to its claim's row
// type, each naming the file, the field and the line.
func (r *Registry) Check() error {
	r.load()
	if len(r.errs) > 0 {
		return fmt.Errorf("%s", strings.Join(r.errs, "\n"))
	}
	return nil
}

// noteInvalid keeps what CheckInput found wrong with an input built with
// the tree.
func (r *Registry) noteInvalid(err error) {
	r.invalidMu.Lock()
	defer r.invalidMu.Unlock()
	r.invalid = append(r.invalid, err.Error())
}

// CheckInputs reports what CheckInput found wrong with the spec inputs
// built with the tree (Describe), one line each: the suite's setup fails
// with it before any spec runs.
func (r *Registry) CheckInputs() error {
	r.invalidMu.Lock()
	defer r.invalidMu.Unlock()
	if len(r.invalid) > 0 {
		return fmt.Errorf("%s", strings.Join(r.invalid, "\n"))
	}
	return nil
}

// ordered are the registered claims in expect.yaml's order (the report's),
// those expect.yaml lacks last.
func (r *Registry) ordered() []registered {
	r.load()
	order := r.file.Names()
	out := slices.Clone(r.claims)
	index := func(c registered) int {
		if i := slices.Index(order, c.info().Name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(out, func(a, b registered) int { return index(a) - index(b) })
	return out
}

// Claims lists the registered claims in expect.yaml's order.
func (r *Registry) Claims() []Info {
	var out []Info
	for _, c := range r.ordered() {
		out = append(out, c.info())
	}
	return out
}

// Names are the registered claims' names: the names config accepts before
// the slash of an interval key.
func (r *Registry) Names() []string {
	var out []string
	for _, c := range r.Claims() {
		out = append(out, c.Name)
	}
	return out
}

// Cases are claim's cases for p as the plan sees them.
func (r *Registry) Cases(claim string, p api.Pair) []Case {
	for _, c := range r.ordered() {
		if c.info().Name == claim {
			return c.cases(p)
		}
	}
	return nil
}

// labels are a claim's labels for pair p (the pair's own come from its
// container).
func labels(c registered, p api.Pair) []string {
	i := c.info()
	topology := fixtures.LabelServer
	if i.PD {
		topology = fixtures.LabelPD
	}
	out := append([]string{fixtures.ClaimLabel(i.Kind), fixtures.FeatureLabel(i.Name), topology}, i.Labels...)
	if i.PolicyLabel {
		out = append(out, policyLabel(c.row(p).RouterArgs, p))
	}
	return out
}

// policyLabel names the policy a pair's claim runs under: the --policy the
// row documents, else the router's default.
func policyLabel(args []string, p api.Pair) string {
	for i, a := range args {
		if a == "--policy" && i+1 < len(args) {
			return "policy:" + args[i+1]
		}
	}
	if p.Router == api.RouterLLMD {
		return "policy:llm-d-scoring"
	}
	return "policy:cache_aware"
}

// describeClaim defines a claim's container for pair p holding the cases
// of uses; deployment gives each spec the deployment of its case. The
// inputs are built here, while the tree is, all but the Target, which is
// read when a spec starts; what CheckInput finds wrong with one goes to
// the registry (CheckInputs).
func (r *Registry) describeClaim(c registered, p api.Pair, uses []Use, target func() Target, deployment func(Use) *PairDeployment) {
	Describe(c.info().Title, Label(labels(c, p)...), func() {
		for _, u := range uses {
			spec := func() {
				base := Spec{Claim: u.Claim.Name, Pair: p, Case: u.Case, Deployment: deployment(u), invalid: r.noteInvalid}
				c.describe(p, u.Case, func() Spec {
					// A deployment of the spec's own is a fresh one each
					// time the spec starts (deployment gives the same kind).
					in := base
					in.Target, in.Deployment = target(), deployment(u)
					return in
				})
			}
			if u.Case.Name == "" {
				spec()
				continue
			}
			Describe(u.Case.Name, spec)
		}
	})
}
