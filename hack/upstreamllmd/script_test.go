// Package upstreamllmd tests hack/upstream-llmd.sh's refusals: they run
// offline (GOPROXY=off), before any build starts.
package upstreamllmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// run runs the script with env on top of a proxy-less environment and
// returns its exit code and stderr.
func run(t *testing.T, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", "../upstream-llmd.sh")
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "E2E_LLMD_DIR="+t.TempDir(), "LLMD_ROUTER_SRC=", "LLMD_KV_CACHE_SRC=")
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String()
}

func TestNeitherWayAvailableIsOneLineNamingBoth(t *testing.T) {
	code, stderr := run(t)
	if code == 0 {
		t.Fatal("nothing to build from must fail")
	}
	if strings.Count(stderr, "\n") != 1 {
		t.Fatalf("one line, got:\n%s", stderr)
	}
	for _, want := range []string{"go install github.com/llm-d/llm-d-router/cmd/epp@v0.10.0", "LLMD_ROUTER_SRC", "LLMD_KV_CACHE_SRC"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the line names %q: %s", want, stderr)
		}
	}
}

// fakeModule writes a go.mod of module into a new folder, committed to a
// fresh git repository when commit is set.
func fakeModule(t *testing.T, module string, commit bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if commit {
		for _, args := range [][]string{{"init", "-q"}, {"add", "go.mod"},
			{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "x"}} {
			if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
	}
	return dir
}

func TestRouterSourceMustBeTheV0100Commit(t *testing.T) {
	kv := fakeModule(t, "github.com/llm-d/llm-d-kv-cache", false)
	code, stderr := run(t, "LLMD_ROUTER_SRC="+fakeModule(t, "github.com/llm-d/llm-d-router", true), "LLMD_KV_CACHE_SRC="+kv)
	if code == 0 || !strings.Contains(stderr, "not v0.10.0 (71f4f0999f95b96c49a9d0c4afbd18dfdb943c26)") {
		t.Fatalf("another commit is refused: %d %s", code, stderr)
	}
	code, stderr = run(t, "LLMD_ROUTER_SRC="+fakeModule(t, "github.com/llm-d/llm-d-router", false), "LLMD_KV_CACHE_SRC="+kv)
	if code == 0 || !strings.Contains(stderr, "not a git work tree") {
		t.Fatalf("a folder whose commit cannot be read is refused: %d %s", code, stderr)
	}
	code, stderr = run(t, "LLMD_ROUTER_SRC="+kv, "LLMD_KV_CACHE_SRC="+kv)
	if code == 0 || !strings.Contains(stderr, "holds no go.mod of github.com/llm-d/llm-d-router") {
		t.Fatalf("another module is refused: %d %s", code, stderr)
	}
}

// TestTheDifferentialSaysInOneLineWhyItDidNotRun: make test and .ci/run call
// hack/test-upstream-llmd.sh --if-available; where neither way of building
// the EPP exists (this workplace's CI) it is one line and no failure, while
// make test-upstream-llmd, asked for by name, fails.
func TestTheDifferentialSaysInOneLineWhyItDidNotRun(t *testing.T) {
	env := append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "E2E_LLMD_DIR="+t.TempDir(), "LLMD_ROUTER_SRC=", "LLMD_KV_CACHE_SRC=")
	cmd := exec.Command("bash", "../test-upstream-llmd.sh", "--if-available")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--if-available without a way to build: %v\n%s", err, out)
	}
	if strings.Count(string(out), "\n") != 1 || !strings.HasPrefix(string(out), "test-upstream-llmd: not run: ") ||
		!strings.Contains(string(out), "LLMD_ROUTER_SRC") {
		t.Fatalf("want one line saying it was not run and why, got:\n%s", out)
	}
	cmd = exec.Command("bash", "../test-upstream-llmd.sh")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("asked for by name without a build, it must fail; got:\n%s", out)
	}
}
