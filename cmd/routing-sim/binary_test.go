package main

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/upstream/upstreamtest"
)

// TestBinaryServesUntilSIGINT builds routing-sim and drives it as a user
// would over a vllm-router pair (the router built from source, make
// routers): start, wait for the URLs, send a request, SIGINT, expect a
// clean exit 0.
func TestBinaryServesUntilSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	upstreamtest.Install(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	bin := filepath.Join(t.TempDir(), "routing-sim")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command(goTool, append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "-f", writeFile(t, goodYAML), "--timeout", "30s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // a no-op once it has exited

	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	routerRE := regexp.MustCompile(`router \(vllm-router\):\s+(http://\S+/v1)`)
	var base string
	var seen []string
	timeout := time.After(40 * time.Second)
	for !strings.Contains(strings.Join(seen, "\n"), "serving until interrupted") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("exited early; stdout:\n%s\nstderr:\n%s", strings.Join(seen, "\n"), &stderr)
			}
			seen = append(seen, l)
			if m := routerRE.FindStringSubmatch(l); m != nil {
				base = m[1]
			}
		case <-timeout:
			t.Fatalf("not serving; stdout:\n%s\nstderr:\n%s", strings.Join(seen, "\n"), &stderr)
		}
	}
	resp, err := http.Post(base+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"Qwen/Qwen2.5-0.5B-Instruct","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Fatalf("request through %s: %d", base, resp.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		seen = append(seen, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\nstderr:\n%s", err, &stderr)
	}
	if out := strings.Join(seen, "\n"); !strings.Contains(out, "default/cli deleted") ||
		!regexp.MustCompile(`Starting router on 127\.[0-9.]+:8081`).MatchString(out) {
		t.Fatalf("stdout:\n%s", out)
	}
}
