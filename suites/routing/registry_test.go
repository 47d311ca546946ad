package routing

// Unit tests of the claim registry: plain Go tests that do not run the
// Ginkgo suite (make unit runs every test here but TestRouting).

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

func expectFile(t *testing.T) *fixtures.ExpectFile {
	t.Helper()
	f, err := fixtures.Expectations()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRegistryAgreesWithExpectYAML(t *testing.T) {
	f := expectFile(t)
	if err := CheckClaims(Claims(), f); err != nil {
		t.Fatal(err)
	}
	if got, want := ClaimNames(), f.Names(); !slices.Equal(got, want) {
		t.Errorf("registry order %v, want expect.yaml's %v", got, want)
	}
	for _, c := range Claims() {
		if c.Title == "" || c.Spec == nil {
			t.Errorf("claim %q: a row needs a title and a spec function", c.Name)
		}
		if _, err := os.Stat(c.Name + ".go"); err != nil {
			t.Errorf("claim %q: its spec function belongs in %s: %v", c.Name, specFile(c.Name), err)
		}
	}
}

func TestRegistryCheckNamesTheMissingRow(t *testing.T) {
	f := expectFile(t)
	claims := Claims()
	var withoutMetrics []Claim
	for _, c := range claims {
		if c.Name != ClaimMetrics {
			withoutMetrics = append(withoutMetrics, c)
		}
	}
	err := CheckClaims(withoutMetrics, f)
	if err == nil || !strings.Contains(err.Error(), "fixtures/expect.yaml: claims[5] (metrics) has no registered claim; add suites/routing/metrics.go") {
		t.Errorf("a claim expect.yaml has but the registry lacks: err = %v", err)
	}
	extra := append(slices.Clone(claims), Claim{Name: "latency", Title: "Latency"})
	err = CheckClaims(extra, f)
	if err == nil || !strings.Contains(err.Error(), `fixtures/expect.yaml: no claims entry named "latency" for the registered claim "Latency" (suites/routing/latency.go)`) {
		t.Errorf("a registered claim expect.yaml lacks: err = %v", err)
	}
	err = CheckClaims(append(slices.Clone(claims), claims[0]), f)
	if err == nil || !strings.Contains(err.Error(), `claim "defaults" is registered twice`) {
		t.Errorf("a claim registered twice: err = %v", err)
	}
}

func TestRegistryRequireNamesTheRowThatLacksAField(t *testing.T) {
	f := expectFile(t)
	broken := *f
	broken.Claims = slices.Clone(f.Claims)
	for i, c := range broken.Claims {
		if c.Name == ClaimRoundRobin {
			c.Pairs = slices.Clone(c.Pairs)
			c.Pairs[1].Series = nil
			c.Pairs[0].Banner = "RoundRobin"
			broken.Claims[i] = c
		}
	}
	err := CheckClaims(Claims(), &broken)
	for _, want := range []string{
		"fixtures/expect.yaml: claims[roundrobin].pairs[1] (sglang-gateway+SGLang): roundrobin needs banner, split and series",
		`fixtures/expect.yaml: claims[roundrobin].pairs[0] (vllm-router+vLLM): banner "RoundRobin" must be written "policy: <the policy as the router prints it>"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
}

func TestRegistryNamesAreTheIntervalKeysOfE2EYAML(t *testing.T) {
	if _, err := config.Load(filepath.Join("..", "..", "e2e.yaml"), ClaimNames()...); err != nil {
		t.Fatalf("the repository's e2e.yaml with the registry's claim names: %v", err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	_, err := config.Parse("e2e.yaml", []byte("intervals:\n  affinty/wait-ready: [1m, 1s]\n"), t.TempDir(), noEnv, ClaimNames()...)
	want := `e2e.yaml: intervals.affinty/wait-ready names spec "affinty", which is not one of default, ` + strings.Join(slices.Sorted(slices.Values(ClaimNames())), ", ") + ` (line 2)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant %q", err, want)
	}
	for _, name := range ClaimNames() {
		if err != nil && !strings.Contains(err.Error(), " "+name+",") && !strings.Contains(err.Error(), " "+name+" (line") {
			t.Errorf("the error does not list the claim %q: %v", name, err)
		}
	}
	for _, name := range ClaimNames() {
		c, err := config.Parse("e2e.yaml", []byte("intervals:\n  "+name+"/wait-ready: [1m, 1s]\n"), t.TempDir(), noEnv, ClaimNames()...)
		if err != nil {
			t.Errorf("%s/wait-ready: %v", name, err)
			continue
		}
		if iv, err := c.Interval(name, config.OpWaitReady); err != nil {
			t.Errorf("Interval(%s, wait-ready): %v", name, err)
		} else if c.Target == config.TargetKube && iv.Timeout.D().Minutes() != 1 {
			t.Errorf("Interval(%s, wait-ready) = %s", name, iv)
		}
	}
}

// readmeClaims reads the first column of the README's claim table.
func readmeClaims(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| `suites/routing/([a-z0-9-]+\\.go)` \\|")
	out := map[string]string{}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "| claim | spec file |"):
			in = true
		case in && !strings.HasPrefix(l, "|"):
			in = false
		case in:
			if m := row.FindStringSubmatch(l); m != nil {
				out[m[1]] = m[2]
			}
		}
	}
	return out
}

func TestRegistryREADMEClaimTableListsEveryClaim(t *testing.T) {
	rows := readmeClaims(t)
	if len(rows) == 0 {
		t.Fatal("README.md has no claim table (a \"| claim | spec file | what is asserted |\" header with \"| `<claim>` | `suites/routing/<claim>.go` | ... |\" rows)")
	}
	for _, name := range ClaimNames() {
		file, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("README.md: the claim table has no row for %q; add \"| `%s` | `%s` | <what is asserted> |\"", name, name, specFile(name))
		case file != name+".go":
			t.Errorf("README.md: the row of %q names suites/routing/%s, want %s", name, file, specFile(name))
		}
	}
	for name := range rows {
		if !slices.Contains(ClaimNames(), name) {
			t.Errorf("README.md: the claim table has a row for %q, which is not a registered claim", name)
		}
	}
}

// claimsOfKind are the registered claims of the given kinds.
func claimsOfKind(kinds ...string) []Claim {
	var out []Claim
	for _, c := range Claims() {
		if slices.Contains(kinds, fixtures.ClaimKind(c.Name)) {
			out = append(out, c)
		}
	}
	return out
}

// documentedClaims are the registered claims of kind documented.
func documentedClaims() []Claim { return claimsOfKind(fixtures.KindDocumented) }

// simEnginePods counts the engine Pods the claims start on the sim, where
// every documented pair runs: two per shared deployment, per bad --policy
// value and per thresholds case with router args of its own; one per bad
// threshold value; killengine's replacement of the Pod it kills; and a
// prefill/decode pair's replicas for each shared pair and each bad per-pool
// value.
func simEnginePods(claims []Claim) (pods, deployments int) {
	has := func(name string) bool {
		return slices.ContainsFunc(claims, func(c Claim) bool { return c.Name == name })
	}
	row := func(claim string, p api.Pair) fixtures.Expectation {
		exp, _ := fixtures.Lookup(claim, p)
		if exp.NotApplicable != "" {
			return fixtures.Expectation{}
		}
		return exp
	}
	for _, p := range fixtures.DocumentedPairs {
		gs, _ := plan(claims, p, false)
		n := 0
		for _, g := range gs {
			if g.pd != nil {
				// A prefill/decode pair: its own replica counts.
				pods += int(g.pd.Prefill + g.pd.Decode)
				deployments++
				continue
			}
			n++
		}
		if b := row(ClaimBadPolicy, p).BadPolicy; has(ClaimBadPolicy) && b != nil {
			n += len(b.Values)
		}
		if r := row(ClaimPDBadPolicy, p); has(ClaimPDBadPolicy) && r.PD != nil && r.BadPolicy != nil {
			bad := len(r.BadPolicy.Values)
			pods += bad * int(r.PD.Prefill+r.PD.Decode)
			deployments += bad
		}
		if has(ClaimThresholds) {
			for _, h := range row(ClaimThresholds, p).Thresholds {
				if len(h.RouterArgs) > 0 {
					n++
				}
			}
		}
		pods += 2 * n
		deployments += n
		if has(ClaimBadThreshold) {
			bad := len(badThresholdArgs(row(ClaimBadThreshold, p)))
			pods += badThresholdReplicas * bad
			deployments += bad
		}
		if has(ClaimKillEngine) && row(ClaimKillEngine, p).Fault != nil {
			pods++ // the replacement of the killed Pod
		}
	}
	return pods, deployments
}

// The documented suite must start at most 22 engine Pods on the sim (18
// for the argv pairs, one default deployment per llm-d pair), and each
// shared deployment is named for its args. The extended claims share the
// default deployment where they can (concurrency, routing text, the
// thresholds' default case); every other policy or threshold setting is a
// deployment of its own. The claims that edit or fault a deployment share
// the default one and run after every claim that needs its pristine
// history.
func TestRegistryPlanSharesOneDeploymentPerPairAndRouterArgs(t *testing.T) {
	type shape struct {
		groups map[string][]string // args -> claims
		alone  []string
	}
	read := func(claims []Claim, p api.Pair, isolate bool) shape {
		gs, alone := plan(claims, p, isolate)
		s := shape{groups: map[string][]string{}}
		for _, g := range gs {
			key := strings.Join(g.args, " ")
			if g.pd != nil {
				key = "pd " + key // a prefill/decode pair, never a server deployment
			}
			for _, c := range g.claims {
				s.groups[key] = append(s.groups[key], c.Name)
			}
		}
		for _, c := range alone {
			s.alone = append(s.alone, c.Name)
		}
		return s
	}
	doc := documentedClaims()
	vr := read(doc, fixtures.VLLMRouterVLLM, false)
	if got := vr.groups[""]; !slices.Equal(got, []string{"defaults", "affinity"}) {
		t.Errorf("vllm-router default deployment: %v", got)
	}
	if got := vr.groups["--policy round_robin"]; !slices.Equal(got, []string{"roundrobin", "admission", "metrics"}) {
		t.Errorf("vllm-router round-robin deployment: %v", got)
	}
	sg := read(doc, fixtures.SGLangGatewaySGLang, false)
	if got := sg.groups[""]; !slices.Equal(got, []string{"defaults", "affinity", "metrics"}) {
		t.Errorf("sglang-gateway default deployment: %v", got)
	}
	if got := sg.groups["--policy round_robin"]; !slices.Equal(got, []string{"roundrobin", "admission"}) {
		t.Errorf("sglang-gateway round-robin deployment: %v", got)
	}
	ld := read(doc, fixtures.LLMDRouterVLLM, false)
	if len(ld.groups) != 1 || !slices.Equal(ld.groups[""], []string{"defaults", "affinity", "metrics"}) ||
		!slices.Equal(ld.alone, []string{"roundrobin", "badpolicy", "admission"}) {
		t.Errorf("llm-d-router: %+v", ld)
	}
	if iso := read(Claims(), fixtures.VLLMRouterVLLM, true); len(iso.groups) != 0 || len(iso.alone) != len(Claims()) {
		t.Errorf("E2E_ISOLATE: %+v", iso)
	}
	if pods, deployments := simEnginePods(doc); pods > 22 {
		t.Errorf("the documented suite on the sim starts %d engine Pods (%d deployments), want at most 22", pods, deployments)
	}

	// Every claim: the mutating ones run last on the default deployment,
	// after the documented and extended claims that read its pristine
	// history, in registry order among themselves.
	all := Claims()
	mutating := []string{"switch", "routerreplicas", "deleterouter", "killengine", "metricshang", "routerhang", "engineerrors"}
	llmdMutating := slices.DeleteFunc(slices.Clone(mutating), func(c string) bool { return c == "engineerrors" })
	if got := read(all, fixtures.VLLMRouterVLLM, false).groups[""]; !slices.Equal(got,
		append([]string{"defaults", "affinity", "concurrency", "routingtext", "thresholds"}, mutating...)) {
		t.Errorf("vllm-router default deployment with every claim: %v", got)
	}
	if got := read(all, fixtures.SGLangGatewaySGLang, false).groups[""]; !slices.Equal(got,
		append([]string{"defaults", "affinity", "metrics", "concurrency", "routingtext", "thresholds"}, mutating...)) {
		t.Errorf("sglang-gateway default deployment with every claim: %v", got)
	}
	for _, p := range []api.Pair{fixtures.LLMDRouterVLLM, fixtures.LLMDRouterSGLang} {
		got := read(all, p, false)
		if !slices.Equal(got.groups[""], append([]string{"defaults", "affinity", "metrics", "concurrency"}, llmdMutating...)) ||
			!slices.Contains(got.alone, "engineerrors") {
			t.Errorf("%s default deployment with every claim: %+v", p, got)
		}
	}
	// The README's figures: keep them in step when a claim adds a
	// deployment or an engine Pod.
	for _, c := range []struct {
		what              string
		claims            []Claim
		pods, deployments int
	}{
		{"documented", doc, 22, 11},
		{"documented plus extended", claimsOfKind(fixtures.KindDocumented, fixtures.KindExtended), 80, 40},
		{"every claim", all, 84, 40},
	} {
		if pods, deployments := simEnginePods(c.claims); pods != c.pods || deployments != c.deployments {
			t.Errorf("%s claims on the sim start %d engine Pods (%d deployments); the README says %d (%d)", c.what, pods, deployments, c.pods, c.deployments)
		}
	}

	if a, b := SharedDeployment(fixtures.VLLMRouterVLLM, nil).Name, SharedDeployment(fixtures.VLLMRouterVLLM, []string{"--policy", "round_robin"}).Name; a == b ||
		a != "shared-vllm-router-vllm" || b != "policy-round-robin-vllm-router-vllm" {
		t.Errorf("shared deployment names %q, %q", a, b)
	}
}

// A claim that mutates its deployment runs after every claim of that
// deployment that does not, whatever the registry order.
func TestRegistryPlanRunsMutatingClaimsLast(t *testing.T) {
	byName := map[string]Claim{}
	for _, c := range Claims() {
		byName[c.Name] = c
	}
	fault := byName[ClaimKillEngine]
	claims := []Claim{byName[ClaimDefaults], fault, byName[ClaimAffinity]}
	groups, _ := plan(claims, fixtures.VLLMRouterVLLM, false)
	if len(groups) != 1 {
		t.Fatalf("groups %d", len(groups))
	}
	var got []string
	for _, c := range groups[0].claims {
		got = append(got, c.Name)
	}
	if !slices.Equal(got, []string{ClaimDefaults, ClaimAffinity, ClaimKillEngine}) {
		t.Errorf("order %v: a fault before affinity would change the split affinity measures", got)
	}
	for _, c := range Claims() {
		if (fixtures.ClaimKind(c.Name) == fixtures.KindResilience || c.Name == ClaimSwitch || c.Name == ClaimRouterReplicas) && !c.Mutates {
			t.Errorf("claim %s edits or faults its deployment but is not marked Mutates", c.Name)
		}
	}
}

// The prefill/decode claims run on pairs, never on a server deployment with
// the same router args; sglang-gateway's two traffic claims share one pair,
// vllm-router's need two (one --policy for both pools, then a flag each).
// On the sim they start 24 engine Pods: 12 for the argv routers' three
// shared pairs of 2+2, 8 for the four bad values' pairs of 1+1, 4 for
// pddecision's 1+1 pair per llm-d engine.
func TestRegistryPlanPutsPDClaimsOnPairs(t *testing.T) {
	shapes := func(p api.Pair) map[string][]string {
		gs, _ := plan(Claims(), p, false)
		out := map[string][]string{}
		for _, g := range gs {
			key := strings.Join(g.args, " ")
			if g.pd != nil {
				key = fmt.Sprintf("pd %d+%d %s", g.pd.Prefill, g.pd.Decode, key)
			}
			for _, c := range g.claims {
				out[key] = append(out[key], c.Name)
			}
		}
		return out
	}
	vr := shapes(fixtures.VLLMRouterVLLM)
	if got := vr["pd 2+2 --policy round_robin"]; !slices.Equal(got, []string{ClaimPDPools}) {
		t.Errorf("vllm-router P/D round-robin pair: %v (all: %v)", got, vr)
	}
	if got := vr["pd 2+2 --prefill-policy round_robin --decode-policy cache_aware"]; !slices.Equal(got, []string{ClaimPDPolicies}) {
		t.Errorf("vllm-router P/D per-pool pair: %v", got)
	}
	if slices.Contains(vr["--policy round_robin"], ClaimPDPools) {
		t.Errorf("a P/D claim shares the server deployment: %v", vr["--policy round_robin"])
	}
	sg := shapes(fixtures.SGLangGatewaySGLang)
	if got := sg["pd 2+2 --policy round_robin --prefill-policy cache_aware --decode-policy cache_aware"]; !slices.Equal(got, []string{ClaimPDPools, ClaimPDPolicies}) {
		t.Errorf("sglang-gateway P/D pair: %v (all: %v)", got, sg)
	}

	var pdClaims []Claim
	for _, c := range Claims() {
		if c.PD {
			pdClaims = append(pdClaims, c)
		}
	}
	if pods, deployments := simEnginePods(pdClaims); pods != 24 || deployments != 9 {
		t.Errorf("the P/D claims start %d engine Pods (%d deployments) on the sim, want 24 (9)", pods, deployments)
	}
	for _, p := range []api.Pair{fixtures.LLMDRouterVLLM, fixtures.LLMDRouterSGLang} {
		if got := shapes(p)["pd 1+1 "]; !slices.Equal(got, []string{ClaimPDDecision}) {
			t.Errorf("%s P/D pair: %v (all: %v)", p, got, shapes(p))
		}
	}
	if d := sharedDeployment(fixtures.VLLMRouterVLLM, []string{"--policy", "round_robin"}, &fixtures.PD{Prefill: 2, Decode: 2}); d.Name != "pd-policy-round-robin-vllm-router-vllm" {
		t.Errorf("P/D shared deployment name %q", d.Name)
	}
}

func TestRegistryLabelsExtendedPDClaims(t *testing.T) {
	for _, c := range Claims() {
		extended := fixtures.ClaimKind(c.Name) == fixtures.KindExtended
		if strings.HasPrefix(c.Name, "pd") != (extended && c.PD) {
			t.Errorf("claim %s: extended %v, PD %v", c.Name, extended, c.PD)
		}
	}
}
