package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/simtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var fakePrograms = programs.Registry{VLLMRouter: simtest.Router, SGLangGateway: simtest.Router, VLLM: simtest.Engine,
	SGLang: simtest.Engine}

const goodYAML = `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: cli}
spec:
  model: {name: Qwen/Qwen2.5-0.5B-Instruct}
  engine: {name: vLLM, version: "0.29.0"}
  router: {name: vllm-router}
  roles:
    - name: server
      replicas: 2
      instanceType: sim-gpu
`

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "md.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCLI(ctx context.Context, args ...string) (int, *proc.Buffer, *proc.Buffer) {
	var out, errb proc.Buffer
	code := run(ctx, args, strings.NewReader(""), &out, &errb, fakePrograms)
	return code, &out, &errb
}

func TestBadInputExitsTwoNamingFieldAndAcceptedValues(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", strings.Replace(goodYAML, "replicas: 2", "replica: 2", 1),
			[]string{`spec.roles[0]: unknown field "replica"`, "accepted fields:", "replicas", "instanceType"}},
		{"unknown top-level field", goodYAML + "extra: 1\n",
			[]string{`(top level): unknown field "extra"`, "apiVersion, kind, metadata, spec, status"}},
		{"wrong kind", strings.Replace(goodYAML, "kind: ModelDeployment", "kind: Deployment", 1),
			[]string{`kind: "Deployment" is not accepted; accepted values: ModelDeployment`}},
		{"wrong apiVersion", strings.Replace(goodYAML, "worker.gpustack.ai/v1", "apps/v1", 1),
			[]string{`apiVersion: "apps/v1" is not accepted`, "worker.gpustack.ai/v1alpha1, worker.gpustack.ai/v1"}},
		{"unknown router", strings.Replace(goodYAML, "vllm-router", "vllm_router", 1),
			[]string{`spec.router.name: Unsupported value: "vllm_router"`, `"llm-d-router", "vllm-router", "sglang-gateway"`}},
		{"unknown engine", strings.Replace(goodYAML, "name: vLLM", "name: vllm", 1),
			[]string{`spec.engine.name: Unsupported value: "vllm": supported values: "vLLM", "SGLang"`}},
		{"missing model name", strings.Replace(goodYAML, "model: {name: Qwen/Qwen2.5-0.5B-Instruct}", "model: {}", 1),
			[]string{"spec.model.name: Required value"}},
		{"missing engine name", strings.Replace(goodYAML, `engine: {name: vLLM, version: "0.29.0"}`,
			`engine: {version: "0.29.0"}`, 1), []string{"spec.engine.name: Required value; accepted values: vLLM, SGLang"}},
		{"wrong type", strings.Replace(goodYAML, "replicas: 2", `replicas: "two"`, 1),
			[]string{"decode ModelDeployment", "replicas"}},
		{"owned router flag", strings.Replace(goodYAML, "router: {name: vllm-router}",
			"router: {name: vllm-router, extraArgs: [--port, \"9\"]}", 1),
			[]string{`spec.router.extraArgs[0]: Invalid value: "--port": "--port" is set by the operator for router "vllm-router"`}},
		{"not yaml", "spec: [unclosed", []string{"not valid YAML"}},
		{"empty", "  \n", []string{"the file is empty"}},
		{"a list", "- a\n- b\n", []string{"expected a ModelDeployment object at the top level, got a list"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errb := runCLI(context.Background(), "-f", writeFile(t, c.yaml))
			if code != exitUsage {
				t.Fatalf("exit %d, want 2; stderr %s", code, errb)
			}
			for _, w := range c.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb)
				}
			}
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{}, {"-f"}, {"-f", "/does/not/exist.yaml"}, {"--bogus"},
		{"-f", "x", "extra"}, {"-f", "x", "--timeout", "0s"}} {
		if code, _, errb := runCLI(context.Background(), args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb)
		}
	}
}

func TestGoodRunServesUntilInterrupt(t *testing.T) {
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	var out, errb proc.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-f", "-", "--timeout", "20s"}, strings.NewReader(goodYAML), &out, &errb,
			fakePrograms)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "serving until interrupted") {
		if time.Now().After(deadline) {
			t.Fatalf("not serving; stdout:\n%s\nstderr:\n%s", &out, &errb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	text := out.String()
	router := regexp.MustCompile(`router \(vllm-router\):\s+(http://127\.[0-9.]+:8081/v1)`).FindStringSubmatch(text)
	metricsURL := regexp.MustCompile(`router metrics:\s+(http://127\.[0-9.]+:9090/metrics)`).FindStringSubmatch(text)
	replicas := regexp.MustCompile(`replica cli-server-\w{5} \(role server, Server\): http://127\.[0-9.]+:8000/v1`).
		FindAllString(text, -1)
	if router == nil || metricsURL == nil || len(replicas) != 2 {
		t.Fatalf("URLs not printed:\n%s", text)
	}
	resp, err := http.Post(router[1]+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"Qwen/Qwen2.5-0.5B-Instruct","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("request through the printed router URL: %d", resp.StatusCode)
	}
	mresp, err := http.Get(metricsURL[1])
	if err != nil || mresp.StatusCode != 200 {
		t.Fatalf("metrics URL: %v", err)
	}
	mresp.Body.Close()
	if !regexp.MustCompile(`\[cli-router-\w+-\w{5}\] Starting router on 0\.0\.0\.0:8081`).MatchString(text) {
		t.Fatalf("router stdout is streamed with its Pod name:\n%s", text)
	}
	http.DefaultClient.CloseIdleConnections()

	interrupt() // SIGINT
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d after interrupt; stderr %s", code, &errb)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not exit after interrupt")
	}
	if !strings.Contains(out.String(), "default/cli deleted") {
		t.Fatalf("cleanup not reported:\n%s", &out)
	}
}

// A router that refuses its arguments can never become Ready: the CLI gives
// up before its timeout, exits 1 and says why, with the router's own error.
func TestRouterRefusingItsArgumentsExitsOneNamingWhy(t *testing.T) {
	y := strings.Replace(goodYAML, "router: {name: vllm-router}",
		"router: {name: vllm-router, extraArgs: [--policy, roundrobin]}", 1)
	// "cannot become Ready" comes only from the early stop; running out the
	// timeout would say "not ready ... deadline exceeded" instead.
	code, out, errb := runCLI(context.Background(), "-f", writeFile(t, y), "--timeout", "30s")
	if code != exitFailure {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"cannot become Ready", "last exit code 2", "still missing: "} {
		if !strings.Contains(errb.String(), want) {
			t.Fatalf("stderr names what was missing (%q):\n%s", want, errb)
		}
	}
	if !strings.Contains(errb.String(), "error: invalid value 'roundrobin' for '--policy <POLICY>'") {
		t.Fatalf("router stderr is streamed:\n%s\nstdout:\n%s", errb, out)
	}
}

// The llm-d-router example runs on the real epp and envoy (the fake
// engines stand in for vLLM): the router answers through envoy, and the
// epp's startup lines and envoy's access log are streamed.
func TestLLMDExampleServesThroughEnvoyAndStreamsBothContainers(t *testing.T) {
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	var out, errb proc.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-f", filepath.Join("examples", "llm-d-router.yaml"), "--timeout", "20s",
			"--picker-seed", "9"}, strings.NewReader(""), &out, &errb, fakePrograms)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "serving until interrupted") {
		if time.Now().After(deadline) {
			t.Fatalf("not serving; stdout:\n%s\nstderr:\n%s", &out, &errb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	router := regexp.MustCompile(`router \(llm-d-router\):\s+(http://127\.[0-9.]+:8081/v1)`).FindStringSubmatch(out.String())
	if router == nil {
		t.Fatalf("router URL not printed:\n%s", &out)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(router[1]+"/chat/completions", "application/json", strings.NewReader(
		`{"model":"Qwen/Qwen2.5-0.5B-Instruct","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Fatalf("chat through llm-d-router: %d", resp.StatusCode)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), `"upstream_host":"127.`); {
		if time.Now().After(deadline) {
			t.Fatalf("no envoy access-log line streamed:\n%s", &out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	interrupt()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d; stderr %s", code, &errb)
	}
	all := out.String() + errb.String()
	if !strings.Contains(all, "Effective raw configuration") || !strings.Contains(all, `"msg":"Calculated score"`) {
		t.Fatalf("the epp's startup and --v=4 score lines are not streamed:\n%s", all)
	}
}
