package routing

// Unit tests of the suite's claims: plain Go tests that do not run the
// Ginkgo suite (make unit runs every test here but TestRouting). Every list
// they check is read from the registry and fixtures/expect.yaml.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
)

func TestEveryRowReadsIntoItsClaimsRowType(t *testing.T) {
	if err := Registry.Check(); err != nil {
		t.Fatal(err)
	}
	f, err := fixtures.Expectations()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Registry.Names(), f.Names(); !slices.Equal(got, want) {
		t.Errorf("registry order %v, want expect.yaml's %v", got, want)
	}
}

// A claim is its file: every registered claim is <name>.go here, says what
// it asserts, and every file of the package is a claim or a shared spec
// shape.
func TestEveryClaimIsAFileThatSaysWhatItAsserts(t *testing.T) {
	shapes := []string{"suite.go", "policy.go", "fault.go", "pd.go"}
	names := Registry.Names()
	for _, c := range Registry.Claims() {
		if c.Title == "" || len(c.Asserts) < 40 {
			t.Errorf("claim %q: a registry row needs a title and, in Asserts, what its specs assert", c.Name)
		}
		if _, err := os.Stat(c.Name + ".go"); err != nil {
			t.Errorf("claim %q: its file %s.go: %v", c.Name, c.Name, err)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(file, ".go")
		if !strings.HasSuffix(file, "_test.go") && !slices.Contains(names, name) && !slices.Contains(shapes, file) {
			t.Errorf("%s is neither a claim's file nor a shared spec shape: the framework's helpers belong in suites/framework", file)
		}
	}
}

func TestClaimNamesAreTheIntervalKeysOfE2EYAML(t *testing.T) {
	names := Registry.Names()
	if _, err := config.Load(filepath.Join("..", "..", "e2e.yaml"), names...); err != nil {
		t.Fatalf("the repository's e2e.yaml with the registry's claim names: %v", err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	_, err := config.Parse("e2e.yaml", []byte("intervals:\n  affinty/wait-ready: [1m, 1s]\n"), t.TempDir(), noEnv, names...)
	want := `e2e.yaml: intervals.affinty/wait-ready names spec "affinty", which is not one of default, ` + strings.Join(slices.Sorted(slices.Values(names)), ", ") + ` (line 2)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant %q", err, want)
	}
	for _, name := range names {
		if _, err := config.Parse("e2e.yaml", []byte("intervals:\n  "+name+"/wait-ready: [1m, 1s]\n"), t.TempDir(), noEnv, names...); err != nil {
			t.Errorf("%s/wait-ready: %v", name, err)
		}
	}
}

// What makes sharing safe, read from the plan of every claim: the cases
// that edit or fault a deployment run after every case that needs its
// pristine history; a prefill/decode claim never shares a server
// deployment; resilience claims and the claims that edit are marked so.
func TestThePlanKeepsSharedHistoryHarmless(t *testing.T) {
	for _, c := range Registry.Claims() {
		if c.Kind == fixtures.KindResilience && !c.Mutates {
			t.Errorf("claim %s injects a fault but is not marked Mutates", c.Name)
		}
		if strings.HasPrefix(c.Name, "pd") != (c.Kind == fixtures.KindExtended && c.PD) {
			t.Errorf("claim %s: the prefill/decode claims are the extended ones named pd*: kind %s, PD %v", c.Name, c.Kind, c.PD)
		}
	}
	for _, pp := range Registry.Plan(nil, false).Pairs {
		for _, s := range pp.Shared {
			var order []string
			mutating := false
			for _, u := range s.Uses {
				order = append(order, u.Claim.Name)
				if mutating && !u.Claim.Mutates {
					t.Errorf("%s %s: %s runs after a claim that edits or faults the deployment: %v", pp.Pair, s.Name, u.Claim.Name, order)
				}
				mutating = mutating || u.Claim.Mutates
				if u.Claim.PD != s.PD() {
					t.Errorf("%s %s: claim %s (PD %v) on a deployment with PD %v", pp.Pair, s.Name, u.Claim.Name, u.Claim.PD, s.PD())
				}
			}
		}
	}
	for _, pp := range Registry.Plan(nil, true).Pairs {
		if len(pp.Shared) != 0 {
			t.Errorf("E2E_ISOLATE: %s still shares %d deployments", pp.Pair, len(pp.Shared))
		}
	}
}

// Sharing saves deployments and costs none: the plan of every claim
// creates no more ModelDeployments and engine Pods than the same claims
// with a deployment each (E2E_ISOLATE=1), and the extended claims add
// none to the documented ones' shared deployments but the ones they create
// for settings of their own.
func TestSharingNeverCostsMoreThanIsolating(t *testing.T) {
	replicas := config.Default().Replicas
	shared, isolated := Registry.Plan(nil, false).Cost(replicas), Registry.Plan(nil, true).Cost(replicas)
	if shared.EnginePods > isolated.EnginePods || shared.ModelDeployments > isolated.ModelDeployments {
		t.Errorf("sharing costs %+v, one deployment per case %+v", shared, isolated)
	}
	t.Logf("every claim on every pair: %+v shared, %+v isolated", shared, isolated)
}
