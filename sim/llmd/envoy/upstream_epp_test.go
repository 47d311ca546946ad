package envoy_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/envoy"
	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
	"github.com/gpustack/routing-conformance/sim/llmd/llmdtest"
	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// realEPP is the binary make upstream-llmd built (its manifest's path, in
// the repository's .upstream-llmd), or "" when there is none.
func realEPP(t *testing.T) string {
	t.Helper()
	in, err := upstream.LoadEPP("")
	if errors.Is(err, upstream.ErrEPPNotInstalled) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return in.Binary
}

// TestRealEPPServesTheEmulatedEnvoy runs llm-d-router v0.10.0's own EPP
// (file discovery, one engine) behind this Envoy: the ext_proc client must
// get its picks for a buffered, a streamed and a body-less request.
func TestRealEPPServesTheEmulatedEnvoy(t *testing.T) {
	bin := realEPP(t)
	if bin == "" {
		t.Skip("no real EPP built: make upstream-llmd")
	}
	e := llmdtest.StartEngine(t, "real-a", "127.0.8.1", 0)
	dir := t.TempDir()
	endpoints := "endpoints:\n- name: real-a\n  address: 127.0.8.1\n  port: \"" + strconv.Itoa(e.Port) + "\"\n"
	config := `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- {type: file-discovery, name: file-discovery, parameters: {path: ` + filepath.Join(dir, "endpoints.yaml") + `}}
- {type: queue-scorer}
- {type: max-score-picker}
schedulingProfiles:
- name: default
  plugins: [{pluginRef: queue-scorer}, {pluginRef: max-score-picker}]
dataLayer:
  discovery: {pluginRef: file-discovery}
`
	for name, text := range map[string]string{"endpoints.yaml": endpoints, "epp.yaml": config} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grpcPort := llmdtest.FreePort(t, "127.0.0.1")
	var out proc.Buffer
	cmd := exec.Command(bin, "--pool-name=real", "--secure-serving=false", "--config-file="+filepath.Join(dir, "epp.yaml"),
		"--grpc-port="+strconv.Itoa(grpcPort), "--grpc-health-port="+strconv.Itoa(llmdtest.FreePort(t, "127.0.0.1")),
		"--metrics-port="+strconv.Itoa(llmdtest.FreePort(t, "127.0.0.1")), "--metrics-endpoint-auth=false")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("epp output:\n%s", out.String())
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort))
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the EPP did not listen on its --grpc-port")
		}
		time.Sleep(50 * time.Millisecond)
	}

	cfg, err := envoy.ParseConfig([]byte(llmdtest.EnvoyYAML("86400")))
	if err != nil {
		t.Fatal(err)
	}
	client, err := extproc.NewClient(addr, cfg.ExtProcAuthority, cfg.ExtProcConnectTimeout)
	if err != nil {
		t.Fatal(err)
	}
	log := &proc.Buffer{}
	p := envoy.NewProxy(cfg, client, log)
	s := httptest.NewServer(p)
	t.Cleanup(func() { s.Close(); p.Close(); client.Close() })

	// File discovery loads after the server listens: until then the EPP
	// has no endpoint and the request fails open.
	var resp *http.Response
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, body = post(t, s.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
		if resp.StatusCode == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp.StatusCode != 200 || !strings.Contains(body, `"served_by":"real-a"`) || resp.Header.Get("x-went-into-resp-headers") != "true" {
		t.Fatalf("chat through the real EPP: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if h, _ := e.Last(); h.Get("x-gateway-destination-endpoint") != e.Addr() {
		t.Fatalf("the engine saw the EPP's pick %q, want %s", h.Get("x-gateway-destination-endpoint"), e.Addr())
	}

	direct, err := http.Post("http://"+e.Addr()+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(direct.Body)
	direct.Body.Close()
	resp, got := post(t, s.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 200 || got != string(want) {
		t.Fatalf("a stream comes back through the real EPP unchanged: %d\n got %q\nwant %q", resp.StatusCode, got, want)
	}

	// An error with an HTTP status comes back as an immediate response.
	resp, body = post(t, s.URL+"/v1/chat/completions", `{"model":"m"}`, nil)
	if resp.StatusCode != 400 || !strings.Contains(body, "must have valid messages field") {
		t.Fatalf("the EPP's BadRequest is answered by the proxy: %d %q", resp.StatusCode, body)
	}

	models, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	models.Body.Close()
	if models.StatusCode != 200 {
		t.Fatalf("a body-less GET goes to a random endpoint: %d", models.StatusCode)
	}
	var last map[string]any
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last["upstream_host"] != e.Addr() || last["path"] != "/v1/models" {
		t.Fatalf("access log of the GET: %v", last)
	}
}
