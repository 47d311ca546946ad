package routing

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/suites/framework"
)

var updateDocs = flag.Bool("update-docs", false, "write the generated blocks of README.md and e2e.yaml (make docs)")

// The README's claims and deployment tables and e2e.yaml's list of claim
// names are generated from the registry, the README's table of environment
// variables from config's; make docs writes them, and make
// unit fails here, naming the file, when one is stale.
func TestGeneratedDocsAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, g := range []struct {
		file, block, body string
	}{
		{"README.md", "claims", Registry.ClaimsTable("suites/routing")},
		{"README.md", "deployments", Registry.DeploymentsTable(config.Default().Replicas)},
		{"README.md", "knobs", config.OverridesTable()},
		{"e2e.yaml", "claims", Registry.ClaimList("#   ", 78)},
	} {
		path := filepath.Join(root, g.file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := framework.ReplaceBlock(string(b), g.block, g.body)
		if err != nil {
			t.Fatalf("%s: %v", g.file, err)
		}
		if want == string(b) {
			continue
		}
		if *updateDocs {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote the %s block of %s", g.block, g.file)
			continue
		}
		t.Errorf("%s: the generated %s block is stale; run make docs", g.file, g.block)
	}
}
