package epp_test

import (
	"bufio"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	"github.com/gpustack/routing-conformance/sim/llmd/envoy"
	"github.com/gpustack/routing-conformance/sim/llmd/epp"
	"github.com/gpustack/routing-conformance/sim/llmd/llmdtest"
	"github.com/gpustack/routing-conformance/sim/llmd/prefixcache"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// The testdata/*.yaml files are the operator's EndpointPickerConfig for
// deployment "qwen" in namespace "team-a" as sim/operator renders
// it (RenderEPPConfig): server or prefill+decode roles, SGLang or vLLM.

// routerPod is one llm-d router Pod (envoy + epp) in front of fake engines.
type routerPod struct {
	t        testing.TB
	ip       string
	pods     *llmdtest.Pods
	engines  []*llmdtest.Engine
	epp      *llmdtest.Running
	envoy    *llmdtest.Running
	eppErr   *proc.Buffer
	envoyOut *proc.Buffer
	started  chan epp.StartInfo
}

var nextIP = 20

// newIP hands out loopback addresses per test Pod.
func newIP() string {
	nextIP++
	return "127.0.3." + strconv.Itoa(nextIP)
}

type podOpts struct {
	config    string   // testdata file
	kinds     []string // role kind per engine
	extraArgs []string
	seed      uint64
	envoyYAML string
	client    *http.Client
	kv        prefixcache.KVEventSource
}

func startRouter(t testing.TB, o podOpts) *routerPod {
	t.Helper()
	cfg, err := os.ReadFile("testdata/" + o.config)
	if err != nil {
		t.Fatal(err)
	}
	r := &routerPod{t: t, ip: newIP(), pods: llmdtest.NewPods(), started: make(chan epp.StartInfo, 1)}
	var ips []string
	for range o.kinds {
		ips = append(ips, newIP())
	}
	// The operator's metrics-data-source pins the serving port (8000);
	// every engine has its own loopback address, as Pods do.
	port := 8000
	for i, kind := range o.kinds {
		e := llmdtest.StartEngine(t, "qwen-"+kind+"-"+strconv.Itoa(i), ips[i], port)
		r.engines = append(r.engines, e)
		r.pods.Put(llmdtest.EnginePod(e.Name, "team-a", e.IP, "qwen", kind))
	}
	// The router Pod itself carries the instance label and must not be selected.
	r.pods.Put(datalayer.Pod{Name: "qwen-router-7d9f8-abcde", Namespace: "team-a", IP: r.ip, Ready: true,
		Labels: map[string]string{"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "qwen",
			"modeldeployment.gpustack.ai/router": "llm-d-router"}})
	envoyYAML := o.envoyYAML
	if envoyYAML == "" {
		envoyYAML = llmdtest.EnvoyYAML("86400")
	}
	files := llmdtest.Files(map[string]string{"config/epp.yaml": string(cfg), "config/envoy.yaml": envoyYAML})
	args := append([]string{
		"--endpoint-selector=" + llmdtest.Selector("qwen"),
		"--endpoint-target-ports=" + strconv.Itoa(port),
		"--config-file=/config/epp.yaml", "--secure-serving=false", "--grpc-health-port=9003", "--metrics-endpoint-auth=false",
	}, o.extraArgs...)
	c, _, eppErr := llmdtest.Container(r.ip, "qwen-router-7d9f8-abcde", args,
		map[string]string{"POD_NAME": "qwen-router-7d9f8-abcde", "NAMESPACE": "team-a"})
	r.eppErr = eppErr
	seed := o.seed
	if seed == 0 {
		seed = 42
	}
	r.epp = llmdtest.Run(epp.Main(epp.Deps{
		Files:      func(*proc.Container) fs.FS { return files },
		Pods:       func(*proc.Container) datalayer.PodSource { return r.pods },
		Seed:       seed,
		HTTPClient: o.client,
		KVEvents:   o.kv,
		Started:    func(i epp.StartInfo) { r.started <- i },
	}), c)
	ec, envoyOut, _ := llmdtest.Container(r.ip, "qwen-router-7d9f8-abcde", []string{"-c", "/config/envoy.yaml"}, nil)
	r.envoyOut = envoyOut
	r.envoy = llmdtest.Run(envoy.Main(envoy.Deps{Files: func(*proc.Container) fs.FS { return files }}), ec)
	t.Cleanup(func() {
		r.envoy.Stop()
		r.epp.Stop()
	})
	return r
}

// waitStarted waits for the EPP to serve and for discovery to settle.
func (r *routerPod) waitStarted() epp.StartInfo {
	r.t.Helper()
	select {
	case i := <-r.started:
		r.waitFor(func() bool {
			return strings.Count(r.eppErr.String(), `"msg":"Pod added"`) >= len(r.engines)
		}, "engine Pods discovered")
		r.waitFor(func() bool {
			c, err := net.Dial("tcp", net.JoinHostPort(r.ip, "8081"))
			if err == nil {
				c.Close()
			}
			return err == nil
		}, "envoy listening")
		return i
	case <-time.After(10 * time.Second):
		r.t.Fatalf("epp did not start; stderr:\n%s", r.eppErr.String())
	}
	return epp.StartInfo{}
}

func (r *routerPod) waitFor(cond func() bool, what string) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s; epp stderr:\n%s", what, r.eppErr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *routerPod) url(path string) string { return "http://" + net.JoinHostPort(r.ip, "8081") + path }

func (r *routerPod) post(path, body string, header map[string]string) (*http.Response, string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	var resp *http.Response
	var err error
	for i := 0; i < 100; i++ { // envoy may still be binding
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
		req.Body = io.NopCloser(strings.NewReader(body))
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (r *routerPod) metrics() string {
	r.t.Helper()
	resp, err := http.Get("http://" + net.JoinHostPort(r.ip, "9090") + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// logLines decodes the EPP's JSON log lines.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v\n%s", err, line)
		}
		out = append(out, m)
	}
	return out
}
