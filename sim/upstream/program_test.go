package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/upstream"
	"github.com/gpustack/routing-conformance/sim/upstream/upstreamtest"
)

// sick holds the names of the engine Pods whose /health answers 503.
var sick sync.Map

// engine is a minimal OpenAI engine for the routers: /health (503 while
// its Pod's name is in sick),
// /server_info, /v1/models and the generation routes, answering with the
// Pod's name. It returns no model_path from /server_info
// (sgl-model-gateway would try to load a tokenizer by it).
func engine(served *sync.Map) proc.Main {
	return func(ctx context.Context, c *proc.Container) int {
		l, err := c.Listen("0.0.0.0:8000")
		if err != nil {
			fmt.Fprintln(c.Stderr, err)
			return 1
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
			if _, ok := sick.Load(c.Pod.Name); ok {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		// What sgl-model-gateway's registration names the worker's model by.
		mux.HandleFunc("/server_info", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"served_model_name":"m"}`)
		})
		mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		})
		gen := func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			n, _ := served.LoadOrStore(c.Pod.Name, new(int))
			mu.Lock()
			*n.(*int)++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,`+
				`"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, c.Pod.Name)
		}
		mux.HandleFunc("/v1/chat/completions", gen)
		mux.HandleFunc("/v1/completions", gen)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(l) }()
		<-ctx.Done()
		_ = srv.Close()
		return 0
	}
}

var mu sync.Mutex

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func engines(t *testing.T, k *kubelet.Kubelet, served *sync.Map, n int) {
	t.Helper()
	for i := range n {
		_, err := k.Create(kubelet.PodSpec{Name: fmt.Sprintf("md-server-%d", i), Namespace: "ns",
			Labels: map[string]string{"app": "md", "role": "server"},
			Containers: []kubelet.ContainerSpec{{Name: "engine", Main: engine(served), Ports: []int{8000},
				ReadinessProbe: &kubelet.Probe{HTTPPath: "/health", HTTPPort: 8000, Period: 20 * time.Millisecond, FailureThreshold: 3}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func routerPod(t *testing.T, k *kubelet.Kubelet, in *upstream.Install, router string, started chan<- upstream.Start, extra ...string) kubelet.PodStatus {
	t.Helper()
	args := []string{"--host=0.0.0.0", "--port=8081", "--prometheus-host=0.0.0.0", "--prometheus-port=9090",
		"--service-discovery", "--service-discovery-namespace=ns", "--service-discovery-port=8000",
		"--selector", "app=md", "role=server"}
	st, err := k.Create(kubelet.PodSpec{Name: "md-router", Namespace: "ns", TerminationGracePeriod: 10 * time.Second,
		Containers: []kubelet.ContainerSpec{{Name: "router", Args: append(args, extra...), Ports: []int{8081, 9090}, WatchPods: true,
			Main:           in.Program(router, upstream.Options{Started: func(s upstream.Start) { started <- s }}),
			ReadinessProbe: &kubelet.Probe{TCPPort: 8081, Period: 20 * time.Millisecond, FailureThreshold: 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// healthyWorkers counts the healthy workers sgl-model-gateway lists.
func healthyWorkers(ip string) int {
	resp, err := http.Get("http://" + ip + ":8081/workers")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var list struct {
		Workers []struct {
			Healthy bool `json:"is_healthy"`
		} `json:"workers"`
	}
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return -1
	}
	n := 0
	for _, w := range list.Workers {
		if w.Healthy {
			n++
		}
	}
	return n
}

func processGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// TestRoutersRouteThroughThePod runs each built router as a
// router container in front of two engines it discovers through the sim's
// Pods API: it becomes Ready only once the
// process serves, round robin splits 8 chats 4/4, the banner and the
// metric names are the library's, and a delete ends the process.
func TestRoutersRouteThroughThePod(t *testing.T) {
	in := upstreamtest.Install(t)
	for _, tc := range []struct {
		router, banner, metric string
	}{
		{api.RouterVLLM, "policy: RoundRobin", `vllm_router_policy_decisions_total{policy="round_robin"`},
		{api.RouterSGLang, "policy: RoundRobin", "smg_"},
	} {
		t.Run(tc.router, func(t *testing.T) {
			k := upstreamtest.Kubelet(t)
			served := &sync.Map{}
			engines(t, k, served, 2)
			started := make(chan upstream.Start, 4)
			st := routerPod(t, k, in, tc.router, started, "--policy", "round_robin")
			var s upstream.Start
			select {
			case s = <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("no process started")
			}
			eventually(t, 60*time.Second, "router Ready", func() bool { p, _ := k.Get("ns", "md-router"); return p.Ready })
			if tc.router == api.RouterSGLang {
				// Registered workers join once their health checks pass, as
				// discovered ones do.
				eventually(t, 30*time.Second, "both workers healthy", func() bool { return healthyWorkers(st.IP) == 2 })
			}
			// The operator's observer view, from the router's own worker list.
			eventually(t, 30*time.Second, "the observer view lists both engines in selection", func() bool {
				resp, err := http.Get("http://" + st.IP + ":8081" + operator.ObserverPath)
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				ws, err := operator.ParseObserver(b)
				if err != nil || len(ws) != 2 {
					return false
				}
				for _, w := range ws {
					if !w.InSelection || !strings.HasPrefix(w.URL, "http://") || !strings.HasSuffix(w.URL, ":8000") {
						return false
					}
				}
				return true
			})
			for range 8 {
				resp, err := http.Post("http://"+st.IP+":8081/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("chat: %d %s", resp.StatusCode, b)
				}
			}
			for _, name := range []string{"md-server-0", "md-server-1"} {
				n, _ := served.Load(name)
				if n == nil || *n.(*int) != 4 {
					t.Errorf("%s served %v chats, want 4 of 8 under round robin", name, n)
				}
			}
			logs, _ := k.Logs("ns", "md-router", "router", false, time.Time{})
			if !strings.Contains(logs, "Starting router on ") || !strings.Contains(logs, tc.banner) {
				t.Errorf("log lacks the banner with %q:\n%s", tc.banner, logs)
			}
			resp, err := http.Get("http://" + st.IP + ":9090/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), tc.metric) {
				t.Errorf("metrics lack %q:\n%.2000s", tc.metric, b)
			}
			if !k.Delete("ns", "md-router") {
				t.Fatal("delete: no such Pod")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := k.WaitGone(ctx, "ns", "md-router"); err != nil {
				t.Fatal(err)
			}
			if !processGone(s.PID) {
				t.Errorf("process %d still runs after its Pod is gone", s.PID)
			}
		})
	}
}

// TestBadPolicyExitsWithClapsError: the binary's front end is clap, as in
// the operator's image; the container shows its error, with its tip, and
// exit 2.
func TestBadPolicyExitsWithClapsError(t *testing.T) {
	in := upstreamtest.Install(t)
	k := upstreamtest.Kubelet(t)
	served := &sync.Map{}
	engines(t, k, served, 1)
	started := make(chan upstream.Start, 8)
	routerPod(t, k, in, api.RouterVLLM, started, "--policy", "roundrobin")
	var code int32
	eventually(t, 30*time.Second, "the router to exit", func() bool {
		p, _ := k.Get("ns", "md-router")
		c, ok := p.Container("router")
		if ok && c.LastTermination != nil {
			code = c.LastTermination.ExitCode
			return true
		}
		return false
	})
	logs, _ := k.Logs("ns", "md-router", "router", true, time.Time{})
	if code != 2 || !strings.Contains(logs, "error: invalid value 'roundrobin' for '--policy <POLICY>'") ||
		!strings.Contains(logs, "tip: a similar value exists: 'round_robin'") {
		t.Fatalf("exit %d, log:\n%s", code, logs)
	}
}

// TestKillIsSIGKILL: a zero-grace delete kills the process at once.
func TestKillIsSIGKILL(t *testing.T) {
	in := upstreamtest.Install(t)
	k := upstreamtest.Kubelet(t)
	served := &sync.Map{}
	engines(t, k, served, 1)
	started := make(chan upstream.Start, 2)
	routerPod(t, k, in, api.RouterSGLang, started)
	s := <-started
	eventually(t, 60*time.Second, "router Ready", func() bool { p, _ := k.Get("ns", "md-router"); return p.Ready })
	k.Kill("ns", "md-router")
	eventually(t, 5*time.Second, "the process to die", func() bool { return processGone(s.PID) })
}

func TestLoadSaysWhatToRun(t *testing.T) {
	dir := t.TempDir()
	if _, err := upstream.Load(dir); !errors.Is(err, upstream.ErrNotInstalled) || !strings.Contains(err.Error(), "make routers") {
		t.Fatalf("empty dir: %v", err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"pinsSHA256": "0123456789abcdef", "binaries": []}`)
	if _, err := upstream.Load(dir); err == nil || !strings.Contains(err.Error(), "written from another sim/upstream/sdists.txt") {
		t.Fatalf("stale pins: %v", err)
	}
	write(fmt.Sprintf(`{"pinsSHA256": %q, "binaries": [{"path": "/nonexistent/vllm-router", "build": {"router": "vllm-router"}}]}`, upstream.PinsSHA256()))
	if _, err := upstream.Load(dir); err == nil || !strings.Contains(err.Error(), "/nonexistent/vllm-router, which is missing") {
		t.Fatalf("missing binary: %v", err)
	}
	self, _ := os.Executable()
	entry := func(router, binary, lock string) string {
		return fmt.Sprintf(`{"path": %q, "build": {"router": %q, "binary": %q, "hashPinned": true, "lockSHA256": %q}}`, self, router, binary, lock)
	}
	write(fmt.Sprintf(`{"pinsSHA256": %q, "binaries": [%s]}`, upstream.PinsSHA256(), entry("vllm-router", "vllm-router", "beef")))
	if _, err := upstream.Load(dir); err == nil || !strings.Contains(err.Error(), "built with another locks/vllm-router.Cargo.lock") {
		t.Fatalf("stale lock: %v", err)
	}
	write(fmt.Sprintf(`{"pinsSHA256": %q, "binaries": [%s]}`, upstream.PinsSHA256(), entry("vllm-router", "vllm-router", upstream.LockSHA256("vllm-router"))))
	if _, err := upstream.Load(dir); err == nil || !strings.Contains(err.Error(), "lists no sglang-gateway binary") {
		t.Fatalf("missing binary entry: %v", err)
	}
	both := entry("vllm-router", "vllm-router", upstream.LockSHA256("vllm-router")) + "," +
		entry("sglang-gateway", "sgl-model-gateway", upstream.LockSHA256("sgl-model-gateway"))
	write(fmt.Sprintf(`{"pinsSHA256": %q, "binaries": [%s]}`, upstream.PinsSHA256(), both))
	if _, err := upstream.Load(dir); err == nil || !strings.Contains(err.Error(), "names no o200k_base vocab") {
		t.Fatalf("missing vocab: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "o200k_base.tiktoken"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(fmt.Sprintf(`{"pinsSHA256": %q, "tiktokenEncodingsBase": %q, "binaries": [%s]}`, upstream.PinsSHA256(), dir, both))
	in, err := upstream.Load(dir)
	if err != nil {
		t.Fatalf("a complete manifest: %v", err)
	}
	if cmd, err := in.Command(api.RouterSGLang); err != nil || len(cmd) != 1 || cmd[0] != self {
		t.Errorf("Command(%s) = %q, %v; want the binary alone", api.RouterSGLang, cmd, err)
	}
}

// workerURLs are the worker URLs a router's GET /workers lists.
func workerURLs(ip string) ([]string, error) {
	resp, err := http.Get("http://" + ip + ":8081/workers")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Workers []struct {
			URL string `json:"url"`
		} `json:"workers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	var out []string
	for _, w := range list.Workers {
		out = append(out, w.URL)
	}
	return out, nil
}

// A qualification finding about the pinned source without the operator's
// discovery patch (vllm-router 0002, sglang-gateway 0001): an engine Pod
// whose Ready condition turns False stays in the router's worker list,
// since upstream's discovery withdraws a worker only on an update showing
// the Pod's deletionTimestamp (vllm-project/router@v0.1.15:src/service_discovery.rs
// handle_pod_event adds a Ready Pod and never removes an unready one); the
// patch withdraws it. The test fails the engine's readiness probe and reads
// GET /workers once the Pods API has served the Pod unready for 2 s: the
// finding holds while the Pod's URL is still listed. A build with the
// patches (ROUTER_PATCHES) is not what this pins.
func TestUnpatchedDiscoveryKeepsAnUnreadyEngine(t *testing.T) {
	in := upstreamtest.Install(t)
	for _, router := range upstream.Routers() {
		t.Run(router, func(t *testing.T) {
			if b, _ := in.Binary(router); len(b.Build.Patches) > 0 {
				t.Skipf("%s is built with the operator's patches %v", router, b.Build.Patches)
			}
			k := upstreamtest.Kubelet(t)
			engines(t, k, &sync.Map{}, 2)
			started := make(chan upstream.Start, 2)
			routerPod(t, k, in, router, started)
			var ip string
			eventually(t, 60*time.Second, "the router listing both engines", func() bool {
				p, _ := k.Get("ns", "md-router")
				ip = p.IP
				urls, err := workerURLs(ip)
				return p.Ready && err == nil && len(urls) == 2
			})
			victim, _ := k.Get("ns", "md-server-0")
			sick.Store(victim.Name, true)
			t.Cleanup(func() { sick.Delete(victim.Name) })
			eventually(t, 10*time.Second, "the engine Pod unready", func() bool { p, _ := k.Get("ns", victim.Name); return !p.Ready })
			time.Sleep(2 * time.Second)
			urls, err := workerURLs(ip)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s lists %v 2 s after Pod %s (%s) turned unready", router, urls, victim.Name, victim.IP)
			if !slices.Contains(urls, "http://"+victim.IP+":8000") {
				t.Errorf("%s withdrew the unready Pod's worker: the finding no longer holds; update docs/routers-from-source.md", router)
			}
		})
	}
}
