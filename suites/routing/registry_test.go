package routing

// Unit tests of the claim registry: plain Go tests that do not run the
// Ginkgo suite (make unit runs them with -run '^TestRegistry').

import (
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
	want := `e2e.yaml: intervals.affinty/wait-ready names spec "affinty", which is not one of default, admission, affinity, badpolicy, `
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

// documentedClaims are the registered claims of kind documented.
func documentedClaims() []Claim {
	var out []Claim
	for _, c := range Claims() {
		if fixtures.ClaimKind(c.Name) == fixtures.KindDocumented {
			out = append(out, c)
		}
	}
	return out
}

// simEnginePods counts the engine Pods the claims start on the sim, where
// only the argv pairs run (llm-d-router is not simulated yet): two per
// shared deployment, per bad --policy value and per thresholds case with
// router args of its own; one per bad threshold value.
func simEnginePods(claims []Claim) (pods, deployments int) {
	has := func(name string) bool {
		return slices.ContainsFunc(claims, func(c Claim) bool { return c.Name == name })
	}
	for _, p := range []api.Pair{fixtures.VLLMRouterVLLM, fixtures.SGLangGatewaySGLang} {
		gs, _ := plan(claims, p, false)
		n := len(gs)
		if has(ClaimBadPolicy) {
			n += len(badValues(p))
		}
		if has(ClaimThresholds) {
			exp, _ := fixtures.Lookup(ClaimThresholds, p)
			for _, h := range exp.Thresholds {
				if len(h.RouterArgs) > 0 {
					n++
				}
			}
		}
		pods += 2 * n
		deployments += n
		if has(ClaimBadThreshold) {
			exp, _ := fixtures.Lookup(ClaimBadThreshold, p)
			bad := len(badThresholdArgs(exp))
			pods += badThresholdReplicas * bad
			deployments += bad
		}
	}
	return pods, deployments
}

// On the sim only the argv pairs run (llm-d-router is not simulated): the
// documented suite must start at most 18 engine Pods there, and each
// shared deployment is named for its args. The extended claims share the
// default deployment where they can (concurrency, routing text, the
// thresholds' default case); every other policy or threshold setting is a
// deployment of its own.
func TestRegistryPlanSharesOneDeploymentPerPairAndRouterArgs(t *testing.T) {
	type shape struct {
		groups map[string][]string // args -> claims
		alone  []string
	}
	read := func(claims []Claim, p api.Pair, isolate bool) shape {
		gs, alone := plan(claims, p, isolate)
		s := shape{groups: map[string][]string{}}
		for _, g := range gs {
			for _, c := range g.claims {
				s.groups[strings.Join(g.args, " ")] = append(s.groups[strings.Join(g.args, " ")], c.Name)
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
	if pods, deployments := simEnginePods(doc); pods > 18 {
		t.Errorf("the documented suite on the sim starts %d engine Pods (%d deployments), want at most 18", pods, deployments)
	}

	all := Claims()
	if got := read(all, fixtures.VLLMRouterVLLM, false).groups[""]; !slices.Equal(got, []string{"defaults", "affinity", "concurrency", "routingtext", "thresholds"}) {
		t.Errorf("vllm-router default deployment with the extended claims: %v", got)
	}
	if got := read(all, fixtures.SGLangGatewaySGLang, false).groups[""]; !slices.Equal(got, []string{"defaults", "affinity", "metrics", "concurrency", "routingtext", "thresholds"}) {
		t.Errorf("sglang-gateway default deployment with the extended claims: %v", got)
	}
	if got := read(all, fixtures.LLMDRouterSGLang, false).groups[""]; !slices.Equal(got, []string{"defaults", "affinity", "metrics", "concurrency"}) {
		t.Errorf("llm-d-router default deployment with the extended claims: %v", got)
	}
	// The README's figure: keep it in step when a claim adds a deployment.
	if pods, deployments := simEnginePods(all); pods != 52 || deployments != 29 {
		t.Errorf("documented plus extended claims on the sim start %d engine Pods (%d deployments); the README says 52 (29)", pods, deployments)
	}

	if a, b := SharedDeployment(fixtures.VLLMRouterVLLM, nil).Name, SharedDeployment(fixtures.VLLMRouterVLLM, []string{"--policy", "round_robin"}).Name; a == b ||
		a != "shared-vllm-router-vllm" || b != "policy-round-robin-vllm-router-vllm" {
		t.Errorf("shared deployment names %q, %q", a, b)
	}
}
