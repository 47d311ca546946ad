package harness

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/test/apiserver/netns"
)

// nobody is the unprivileged user the no-root run takes.
const nobody = 65534

// This test binary run again as an unprivileged user skips TestHarness with
// one line saying root is missing, exits 0, and starts nothing: never a
// silent pass, never a failure on a machine that cannot run the tier; under
// CI=true it fails with that reason instead.
func TestSkipsWithOneLineWithoutRoot(t *testing.T) {
	netns.Require(t) // root, inside the tier's namespace: able to drop to nobody
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "rc-apiserver-noroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "harness.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	run := func(env ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "-test.run=^TestHarness$", "-test.v")
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		// The run must decide for itself: none of the parent's netns
		// hand-over, and CI only as the case sets it.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "RC_APISERVER_NETNS_") && !strings.HasPrefix(kv, "CI=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		t.Logf("as uid %d with %v:\n%s", nobody, env, out)
		return string(out), err
	}
	const reason = "needs root to create a private network namespace (unshare --net); run `make test-apiserver` as root"

	text, err := run()
	if err != nil {
		t.Fatalf("the unprivileged run failed: %v", err)
	}
	line := "apiserver tier skipped: " + reason
	if n := strings.Count(text, line+"\n"); n != 2 { // Main's line, then the skip's
		t.Errorf("%q appears %d times, want Main's line and TestHarness's skip", line, n)
	}
	if !strings.Contains(text, "--- SKIP: TestHarness") || strings.Contains(text, "--- PASS") || strings.Contains(text, "--- FAIL") {
		t.Errorf("want TestHarness skipped, nothing passed or failed")
	}
	if strings.Contains(text, "kube-apiserver") {
		t.Errorf("the unprivileged run started a control plane")
	}

	// Under CI=true the same run fails with the reason and runs nothing.
	text, err = run("CI=true")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("under CI=true the unprivileged run ended with %v, want exit status 1", err)
	}
	if want := netns.CIFailure(reason) + "\n"; !strings.Contains(text, want) || strings.Contains(text, "--- ") {
		t.Errorf("under CI=true want only %q, got:\n%s", want, text)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
