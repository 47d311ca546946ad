package tier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/test/apiserver/stack"
	"github.com/gpustack/routing-conformance/test/apiserver/suitecompare"
)

// make plan on E2E_TARGET=kube reads the free accelerators of the
// InstanceType the run would use through a real API server (the tier's
// sim-gpu: 8 of 8 free) and says whether the projected peak fits, creating
// nothing.
func TestPlanChecksThePeakAgainstTheInstanceType(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	repo, err := suitecompare.Repo(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "e2e-tier.yaml")
	if err := suitecompare.WriteConfig(repo, cfg); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "e2e")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/e2e")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/e2e: %v\n%s", err, out)
	}
	namespaces := func() int {
		ns, err := s.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(ns.Items)
	}
	before := namespaces()
	plan := func(nodes int, filter string) (string, int) {
		cmd := exec.CommandContext(ctx, bin, "plan", "-target=kube", "-config="+cfg, fmt.Sprintf("-nodes=%d", nodes), "-label-filter="+filter)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "E2E_KUBECONFIG="+s.Kubeconfig, "E2E_ISOLATE=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, rc := plan(2, "claim:documented")
	if want := "Fits: needs 4 accelerators at peak with GINKGO_NODES=2; 8 free on InstanceType sim-gpu"; rc != 0 || !strings.Contains(out, want) {
		t.Errorf("plan of the documented claims = %d, want 0 and %q:\n%s", rc, want, out)
	}
	// Every claim on three processes: the two 2+2 pairs and a server
	// deployment with killengine's replacement Pod at once.
	out, rc = plan(3, "")
	if want := "Does not fit: needs 11 accelerators at peak with GINKGO_NODES=3; 8 free on InstanceType sim-gpu"; rc != 1 || !strings.Contains(out, want) {
		t.Errorf("plan of every claim on 3 processes = %d, want 1 and %q:\n%s", rc, want, out)
	}
	if after := namespaces(); after != before {
		t.Errorf("make plan created something: %d namespaces before, %d after", before, after)
	}
}
