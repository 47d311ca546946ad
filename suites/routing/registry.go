// Package routing is the routing conformance suite: every documented claim
// of the operator's routing page, executed against each router/engine pair
// on the configured target (sim, kube or kind), with the qualification
// report written at the end.
//
// The package is the suite's API: each claim is a spec function with its
// input in <claim>.go, registered as one row of the claim registry, and
// suite_test.go only wires the registry to the target and the report:
//
//	go tool ginkgo -v --procs=2 ./suites/routing -- -e2e.config=$PWD/e2e.yaml -e2e.artifacts=$PWD/artifacts
package routing

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

// Labels every claim's spec carries besides router:, engine:, policy: and
// feature:: claim:documented, claim:extended or claim:resilience (the claims
// entry's kind in fixtures/expect.yaml), and the topology.
const (
	LabelDocumented = "claim:documented"
	// LabelExtended marks claims beyond the routing page, whose outcomes
	// are derived from the routers' algorithms; LabelResilience the faults
	// injected mid-traffic.
	LabelExtended   = "claim:extended"
	LabelResilience = "claim:resilience"
	LabelServer     = "topology:server"
	// LabelPD marks a claim run on prefill/decode pairs (its expect.yaml
	// rows carry pd).
	LabelPD = "topology:pd"
	// LabelNeedsGPU marks specs that run engines: on a real cluster they
	// need accelerators; `--label-filter='!needs:gpu'` runs the rest.
	LabelNeedsGPU = "needs:gpu"
)

// EnvIsolate, set to a true value (E2E_ISOLATE=1), gives every spec a
// deployment of its own again instead of sharing one per pair and router
// args: for debugging a claim without the history of the others.
const EnvIsolate = "E2E_ISOLATE"

// Claim is one row of the registry: a documented claim and how the suite
// runs it. Its name is the claim's one name everywhere: the claims[].name
// of fixtures/expect.yaml, the feature:<name> label, the <name>/<op>
// interval keys of e2e.yaml and the first column of the README's table.
type Claim struct {
	Name string
	// Title is the text of the claim's container in the spec tree.
	Title string
	// PD is a claim run on prefill/decode pairs (topology:pd instead of
	// topology:server); the pair's shape is each row's pd.
	PD bool
	// Labels are the claim's labels besides claim:<kind> (its claims
	// entry's kind in expect.yaml), topology:server (or topology:pd) and
	// feature:<name>.
	Labels []string
	// Mutates: the claim's specs change the deployment they share (an
	// edit, a fault) and leave it whole again. They run after every claim
	// of their deployment that does not, so no earlier outcome can see
	// them (plan).
	Mutates bool
	// PolicyLabel adds policy:<the --policy of the claim's routerArgs, else
	// the router's default> to each pair's container.
	PolicyLabel bool
	// Require lists what an applicable expect.yaml row of the claim lacks
	// (nil: nothing). CheckClaims runs it on every row.
	Require func(fixtures.Expectation) []string
	// Deployment gives the creation-time router args of the deployment the
	// claim's specs run against for a pair, from its expect.yaml row, and
	// false when they create their own objects (or none). Claims with the
	// same args for a pair share one deployment. Nil: never shared.
	Deployment func(fixtures.Expectation) ([]string, bool)
	// Spec defines the claim's specs for one pair (its spec function,
	// with its own input built from the common one).
	Spec func(p api.Pair, input func() Input)
}

// registry holds every claim; each <claim>.go adds its row with register.
var registry []Claim

func register(c Claim) Claim {
	registry = append(registry, c)
	return c
}

// Claims lists the registered claims in expect.yaml's order (the report's),
// claims expect.yaml lacks last.
func Claims() []Claim {
	order := fixtures.ClaimNames()
	out := slices.Clone(registry)
	index := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(out, func(a, b Claim) int {
		return cmp.Or(cmp.Compare(index(a.Name), index(b.Name)), strings.Compare(a.Name, b.Name))
	})
	return out
}

// ClaimNames are the registered claims' names: the names config accepts
// before the slash of an interval key.
func ClaimNames() []string {
	var out []string
	for _, c := range Claims() {
		out = append(out, c.Name)
	}
	return out
}

// CheckClaims checks the registry against expect.yaml: each registered
// claim has its claims entry and each entry its registered claim, and every
// applicable row sets what its claim reads. The error names each missing or
// wrong row and the file to fix.
func CheckClaims(claims []Claim, f *fixtures.ExpectFile) error {
	var errs []string
	names := map[string]bool{}
	for _, c := range claims {
		if names[c.Name] {
			errs = append(errs, fmt.Sprintf("suites/routing: claim %q is registered twice", c.Name))
		}
		names[c.Name] = true
		ce, ok := f.Claim(c.Name)
		if !ok {
			errs = append(errs, fmt.Sprintf("fixtures/expect.yaml: no claims entry named %q for the registered claim %q (%s); add one with a row per pair", c.Name, c.Title, specFile(c.Name)))
			continue
		}
		if c.Require == nil {
			continue
		}
		for i, row := range ce.Pairs {
			if row.NotApplicable != "" {
				continue
			}
			for _, msg := range c.Require(row) {
				errs = append(errs, fmt.Sprintf("fixtures/expect.yaml: claims[%s].pairs[%d] (%s): %s", c.Name, i, row.Pair, msg))
			}
		}
	}
	for i, ce := range f.Claims {
		if !names[ce.Name] {
			errs = append(errs, fmt.Sprintf("fixtures/expect.yaml: claims[%d] (%s) has no registered claim; add %s with its spec function and register row", i, ce.Name, specFile(ce.Name)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// specFile is where a claim's spec function lives.
func specFile(name string) string { return "suites/routing/" + name + ".go" }

// documentedArgs is the Deployment of claims that run against a deployment
// created with the router args their expect.yaml row documents (none: the
// router's defaults).
func documentedArgs(e fixtures.Expectation) ([]string, bool) { return e.RouterArgs, true }

// need is the Require helper: msg when ok is false.
func need(out []string, ok bool, msg string) []string {
	if !ok {
		return append(out, msg)
	}
	return out
}

// requireBanner checks an expect.yaml banner is "policy: <Debug form>".
func requireBanner(out []string, banner string) []string {
	if banner == "" {
		return out
	}
	if _, err := bannerPolicy(banner); err != nil {
		return append(out, err.Error())
	}
	return out
}

// isolated reads E2E_ISOLATE: unset or empty is false.
func isolated() (bool, error) {
	v := os.Getenv(EnvIsolate)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: expected true or false (1 or 0)", EnvIsolate, v)
	}
	return b, nil
}

// DescribeClaims defines the whole spec tree from the registry: a container
// per documented pair (labelled router:, engine:) holding, per claim, a
// container with the claim's labels and its spec function.
//
// One deployment per (pair, creation-time router args): the claims whose
// specs run against the same deployment share it inside an Ordered,
// ContinueOnFailure container, in registry order; the first spec that needs
// it creates it (after its own skips), DeferCleanup from BeforeAll deletes
// it after the last, and each spec's failure is its own. That gives, per
// pair:
//
//	router defaults:           defaults, affinity, metrics (sglang-gateway, llm-d-router),
//	                           concurrency, routingtext, thresholds (its defaults case),
//	                           then the claims that mutate it: switch, routerreplicas,
//	                           deleterouter, killengine, metricshang, routerhang,
//	                           engineerrors
//	--policy round_robin:      roundrobin, admission (its "admitted" check), metrics (vllm-router)
//	a deployment each:         badpolicy (one per bad value, deleted once the crash is confirmed),
//	                           every other --policy, threshold setting and bad threshold value
//	none:                      admission's refusals, which create nothing
//
// Why the shared history cannot change an outcome: defaults and roundrobin
// read the startup banner, printed before any traffic. affinity and
// roundrobin are the first traffic on their deployment, and judge engine
// counter deltas over their own requests, with prompts under a fresh nonce;
// vllm-router's cache_aware routes chat on "" whatever came before, and 120
// round-robin picks over two replicas are 60/60 from any starting index.
// metrics only asks that series exist and that their worker labels are
// exactly the replicas, which earlier traffic to the same replicas cannot
// change; the router counters it and roundrobin read are deltas. admission's
// "admitted" check is the round-robin deployment's own creation, which the
// webhook admitted. The extended claims on the default deployment
// (concurrency, routingtext, the thresholds' defaults case) start from
// fresh prompts or session ids and judge deltas over their own requests;
// those that hold requests first wait until the router shows nothing in
// flight; the candidate order they rely on ("first on ties") holds while
// membership does (and a concurrency level's one-replica shape holds
// whichever replica its warm-up took). A claim
// added later must be as indifferent to history, or have its Deployment
// return false.
//
// The claims that edit or fault the deployment (Mutates) run after every
// claim of it that does not, so none of those sees an edit, a replaced Pod
// or an open circuit. Each puts the deployment back as created and whole
// before it ends (restoreAfter; engineerrors replaces the router Pod so its
// open circuit is gone), measures its own traffic only, and judges a split
// over a batch sent after its own edit, on a router Pod that started empty:
// so their order among themselves cannot change an outcome either. Sharing
// saves a deployment per pair on a GPU cluster; only killengine starts an
// engine Pod more (the replacement, one model load).
//
// E2E_ISOLATE=1 gives every spec its own deployment again (named
// <claim>-<pair>, as before sharing), without Ordered containers.
func DescribeClaims(target func() Target) bool {
	for _, p := range fixtures.DocumentedPairs {
		Describe(p.String(), Label(fixtures.PairLabels(p)...), func() {
			isolate, _ := isolated() // a bad value fails the suite in its setup
			describePair(Claims(), p, target, isolate)
		})
	}
	return true
}

// group is the claims of a pair that share one deployment.
type group struct {
	args []string
	// pd is the prefill/decode shape, nil for servers.
	pd     *fixtures.PD
	claims []Claim
}

// sameShape reports whether two deployments have the same roles: both
// servers, or prefill/decode pairs of the same replicas.
func sameShape(a, b *fixtures.PD) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Prefill == b.Prefill && a.Decode == b.Decode
}

// plan sorts a pair's claims into the groups that share a deployment (in
// order of first use) and those that run alone.
func plan(claims []Claim, p api.Pair, isolate bool) (groups []*group, alone []Claim) {
	for _, c := range claims {
		args, pd, shared := sharedArgs(c, p)
		if isolate || !shared {
			alone = append(alone, c)
			continue
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return slices.Equal(g.args, args) && sameShape(g.pd, pd) })
		if i < 0 {
			groups = append(groups, &group{args: args, pd: pd})
			i = len(groups) - 1
		}
		groups[i].claims = append(groups[i].claims, c)
	}
	for _, g := range groups {
		// Claims that mutate the deployment go last, in registry order: the
		// ones that need its pristine history run before any edit or fault.
		slices.SortStableFunc(g.claims, func(a, b Claim) int {
			switch {
			case a.Mutates == b.Mutates:
				return 0
			case b.Mutates:
				return -1
			}
			return 1
		})
	}
	return groups, alone
}

func describePair(claims []Claim, p api.Pair, target func() Target, isolate bool) {
	groups, alone := plan(claims, p, isolate)
	for _, c := range alone {
		describeClaim(c, p, func() Input { return Input{Target: target(), Pair: p} })
	}
	for _, g := range groups {
		d := sharedDeployment(p, g.args, g.pd)
		Describe(sharedText(g.args, g.pd), Ordered, ContinueOnFailure, func() {
			BeforeAll(func() {
				t := target()
				// Runs after the container's last spec, failed or not.
				DeferCleanup(func(ctx SpecContext) { d.Release(ctx, t) }, NodeTimeout(intervalOf(t.Config, g.claims[0].Name, config.OpWaitDeleted).Timeout.D()))
			})
			for _, c := range g.claims {
				describeClaim(c, p, func() Input { return Input{Target: target(), Pair: p, Deployment: d} })
			}
		})
	}
}

// sharedArgs is the router args and prefill/decode shape of the
// deployment claim c's specs share for p, or false when they do not share
// one.
func sharedArgs(c Claim, p api.Pair) ([]string, *fixtures.PD, bool) {
	if c.Deployment == nil {
		return nil, nil, false
	}
	exp, err := fixtures.Lookup(c.Name, p)
	if err != nil || exp.NotApplicable != "" {
		return nil, nil, false // the spec skips or fails on its own
	}
	args, shared := c.Deployment(exp)
	return args, exp.PD, shared
}

// sharedTextPrefix starts the text of every shared deployment's container.
const sharedTextPrefix = "on one deployment"

func sharedText(args []string, pd *fixtures.PD) string {
	what := sharedTextPrefix
	if pd != nil {
		what = fmt.Sprintf("%s of %d prefill and %d decode replicas", what, pd.Prefill, pd.Decode)
	}
	if len(args) == 0 {
		return what + " with the router's defaults"
	}
	return fmt.Sprintf("%s with router args %s", what, strings.Join(args, " "))
}

// kindLabel is claim:<kind> for the claim's kind in expect.yaml.
func kindLabel(claim string) string { return "claim:" + fixtures.ClaimKind(claim) }

func describeClaim(c Claim, p api.Pair, input func() Input) {
	topology := LabelServer
	if c.PD {
		topology = LabelPD
	}
	labels := append(Labels{kindLabel(c.Name), fixtures.FeatureLabel(c.Name), topology}, c.Labels...)
	if c.PolicyLabel {
		labels = append(labels, policyLabel(c.Name, p))
	}
	Describe(c.Title, Label(labels...), func() { c.Spec(p, input) })
}

// policyLabel names the policy a pair's claim runs under: the --policy the
// expectation documents, else the router's default.
func policyLabel(claim string, p api.Pair) string {
	exp, err := fixtures.Lookup(claim, p)
	if err == nil {
		for i, a := range exp.RouterArgs {
			if a == "--policy" && i+1 < len(exp.RouterArgs) {
				return "policy:" + exp.RouterArgs[i+1]
			}
		}
	}
	if p.Router == api.RouterLLMD {
		return "policy:llm-d-scoring"
	}
	return "policy:cache_aware"
}
