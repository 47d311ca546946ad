package routing

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With an API server that cannot be reached (a kubeconfig pointing at a
// closed loopback port) the suite fails once, with the preflight's one line,
// and says nothing more: nothing was created, so the run-namespace cleanup
// has nothing to list (it printed a second, longer connection error as a
// failed DeferCleanup).
func TestUnreachableAPIServerFailsWithThePreflightLineAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // closed: every connection is refused
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: closed, cluster: {server: "https://`+addr+`"}}]
contexts: [{name: closed, context: {cluster: closed, user: u}}]
current-context: closed
users: [{name: u, user: {token: x}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^TestRouting$", "-ginkgo.no-color")
	cmd.Env = append(os.Environ(), "E2E_TARGET=kube", "E2E_KUBECONFIG="+kubeconfig, "E2E_KUBE_CONTEXT=", "ARTIFACTS="+filepath.Join(dir, "artifacts"))
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err == nil {
		t.Fatalf("the suite passed against a closed port:\n%s", text)
	}
	if n := strings.Count(text, "[FAILED] cannot reach the kube target: preflight: cannot reach the Kubernetes API server at https://"+addr); n != 1 {
		t.Errorf("the preflight's line appears %d times, want once:\n%s", n, text)
	}
	for _, never := range []string{"DeferCleanup", "list namespaces", "Summarizing 2 Failures"} {
		if strings.Contains(text, never) {
			t.Errorf("the output says %q after the preflight's line:\n%s", never, text)
		}
	}
}
