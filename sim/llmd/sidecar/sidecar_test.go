package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/internal/routertest"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// fixture is a decode Pod (the sidecar and its engine on one IP) and a
// prefill engine with a Mooncake bootstrap server on its own IP.
type fixture struct {
	sidecar        string // http://<decode pod IP>:<port>
	decode, prefil *routertest.Engine
	stderr         *proc.Buffer
	queries        atomic.Int32
}

func start(t *testing.T, args ...string) (*fixture, int) {
	t.Helper()
	ip := routertest.NextIP()
	decode := routertest.StartEngine(t, "d0", ip, 0, "m")
	prefill := routertest.StartEngine(t, "p0", "", 0, "m")
	f := &fixture{decode: decode, prefil: prefill, stderr: &proc.Buffer{}}

	// The prefiller's bootstrap server (vLLM MooncakeConnector): GET /query.
	bootPort := routertest.FreePort(t, prefill.IP)
	ln, err := net.Listen("tcp", net.JoinHostPort(prefill.IP, strconv.Itoa(bootPort)))
	if err != nil {
		t.Fatal(err)
	}
	boot := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/query" {
			http.NotFound(w, r)
			return
		}
		f.queries.Add(1)
		_, _ = w.Write([]byte(`{"0":{"engine_id":"engine-p0","host":"` + prefill.IP + `"}}`))
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = boot.Serve(ln) }()
	t.Cleanup(func() { _ = boot.Close() })

	port := routertest.FreePort(t, ip)
	argv := append([]string{"--port=" + strconv.Itoa(port), "--model-server-port=" + strconv.Itoa(decode.Port),
		"--mooncake-bootstrap-port=" + strconv.Itoa(bootPort), "--secure-proxy=false"}, args...)
	code := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	c := &proc.Container{Args: argv, Env: map[string]string{}, Stdout: &proc.Buffer{}, Stderr: f.stderr,
		Pod: proc.PodInfo{Name: "md-decode-0", Namespace: "ns", IP: ip},
		Listen: func(addr string) (net.Listener, error) {
			_, p, _ := net.SplitHostPort(addr)
			return net.Listen("tcp", net.JoinHostPort(ip, p))
		}}
	go func() { code <- Main()(ctx, c) }()
	t.Cleanup(func() {
		cancel()
		<-code
	})
	f.sidecar = fmt.Sprintf("http://%s:%d", ip, port)
	routertest.Eventually(t, 5*time.Second, func() bool {
		resp, err := http.Get(f.sidecar + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, "sidecar never listened; stderr:\n%s", f.stderr)
	return f, bootPort
}

func body(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return m
}

func TestDecodeOnlyWithoutThePrefillHeader(t *testing.T) {
	f, _ := start(t, "--kv-connector=mooncake")
	st, _, b := routertest.Post(t, f.sidecar+"/v1/completions", `{"model":"m","prompt":"Hi","max_tokens":4}`, nil)
	if st != 200 || !strings.Contains(string(b), `"worker":"d0"`) {
		t.Fatalf("%d %s", st, b)
	}
	if f.decode.Generations() != 1 || f.prefil.Generations() != 0 || f.queries.Load() != 0 {
		t.Fatalf("decode %d prefill %d bootstrap queries %d", f.decode.Generations(), f.prefil.Generations(), f.queries.Load())
	}
	if _, ok := body(t, f.decode.LastBody())["kv_transfer_params"]; ok {
		t.Errorf("a decode-only request carries kv_transfer_params")
	}
	// Anything else is proxied to the engine as is.
	if st, _, b := routertest.Get(t, f.sidecar+"/v1/models"); st != 200 || !strings.Contains(string(b), `"worker":"d0"`) {
		t.Errorf("/v1/models: %d %s", st, b)
	}
}

func TestMooncakeSplitsTheRequest(t *testing.T) {
	f, boot := start(t, "--kv-connector=mooncake")
	send := func() {
		t.Helper()
		st, _, b := routertest.Post(t, f.sidecar+"/v1/chat/completions", routertest.Chat("m", "long prompt", true),
			map[string]string{PrefillHeader: f.prefil.IP + ":" + strconv.Itoa(f.prefil.Port)})
		if st != 200 || !strings.Contains(string(b), "data: [DONE]") {
			t.Fatalf("%d %s", st, b)
		}
	}
	send()
	routertest.Eventually(t, 5*time.Second, func() bool { return f.prefil.Generations() == 1 }, "no prefill leg")
	pre, dec := body(t, f.prefil.LastBody()), body(t, f.decode.LastBody())
	pk, _ := pre["kv_transfer_params"].(map[string]any)
	dk, _ := dec["kv_transfer_params"].(map[string]any)
	if pre["max_tokens"] != float64(1) || pre["stream"] != false || pk["do_remote_decode"] != true || pk["do_remote_prefill"] != false {
		t.Errorf("prefill leg %v", pre)
	}
	if dec["stream"] != true || dk["do_remote_prefill"] != true || dk["transfer_id"] != pk["transfer_id"] ||
		dk["remote_engine_id"] != "engine-p0" || dk["remote_bootstrap_addr"] != fmt.Sprintf("http://%s:%d", f.prefil.IP, boot) {
		t.Errorf("decode leg %v (prefill's %v)", dec, pk)
	}
	if f.decode.LastHeaders().Get(PrefillHeader) != "" {
		t.Errorf("the header reaches the engine")
	}
	send()
	routertest.Eventually(t, 5*time.Second, func() bool { return f.prefil.Generations() == 2 }, "no second prefill leg")
	if f.decode.Generations() != 2 || f.queries.Load() != 1 {
		t.Fatalf("decode legs %d, bootstrap queries %d (the engine id is cached after the first)", f.decode.Generations(), f.queries.Load())
	}
}

func TestSGLangSendsBothLegsTheBootstrapFields(t *testing.T) {
	f, _ := start(t, "--kv-connector=sglang")
	st, _, b := routertest.Post(t, f.sidecar+"/v1/completions", `{"model":"m","prompt":"long prompt"}`,
		map[string]string{PrefillHeader: f.prefil.IP + ":" + strconv.Itoa(f.prefil.Port)})
	if st != 200 || !strings.Contains(string(b), `"worker":"d0"`) {
		t.Fatalf("%d %s", st, b)
	}
	routertest.Eventually(t, 5*time.Second, func() bool { return f.prefil.Generations() == 1 }, "no prefill leg")
	pre, dec := body(t, f.prefil.LastBody()), body(t, f.decode.LastBody())
	if pre["bootstrap_host"] != f.prefil.IP || pre["bootstrap_port"] != float64(8998) || pre["bootstrap_room"] != dec["bootstrap_room"] || dec["bootstrap_host"] != f.prefil.IP {
		t.Errorf("prefill %v decode %v", pre, dec)
	}
}

func TestFlagsAndConfiguration(t *testing.T) {
	run := func(args ...string) (int, string) {
		errw := &proc.Buffer{}
		c := &proc.Container{Args: args, Env: map[string]string{}, Stdout: &proc.Buffer{}, Stderr: errw,
			Listen: func(string) (net.Listener, error) { return nil, fmt.Errorf("not listening in this test") }}
		return Main()(context.Background(), c), errw.String()
	}
	if code, out := run("--no-such-flag"); code != 2 || !strings.Contains(out, "unknown flag: --no-such-flag") {
		t.Errorf("unknown flag: %d %q", code, out)
	}
	if code, out := run("--kv-connector=rdma", "--secure-proxy=false"); code != 0 ||
		!strings.Contains(out, `"msg":"Invalid configuration"`) || !strings.Contains(out, "--kv-connector must be one of: nixlv2, shared-storage, sglang, mooncake, offloading") {
		t.Errorf("bad connector: %d %q", code, out)
	}
	if code, out := run("--kv-connector=mooncake"); code != 1 || !strings.Contains(out, "--secure-proxy=false only") {
		t.Errorf("secure proxy: %d %q", code, out)
	}
}
