package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/sim/engine/vllm"
	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/programs"
)

func chat(t *testing.T, base, content string) {
	t.Helper()
	postOK(t, base+"/chat/completions",
		`{"model":"Qwen/Qwen2.5-0.5B-Instruct","max_tokens":4,"messages":[{"role":"user","content":"`+content+`"}]}`)
}

// postOK posts a JSON body through llm-d-router and fails unless it answers 200.
func postOK(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s through llm-d-router: %d %s", url, resp.StatusCode, b)
	}
}

// Both llm-d pairs on the real programs: the operator's ConfigMap and two
// containers, the epp's effective configuration, Envoy's access log, the
// per-endpoint series naming both replicas, and the observer-fed status.
func TestLLMDRouterServesBothEngines(t *testing.T) {
	for _, engine := range []string{api.EngineVLLM, api.EngineSGLang} {
		t.Run(engine, func(t *testing.T) {
			c := realCluster(t, sim.Options{PickerSeed: 42})
			d := deployReady(t, c, md("llmd", api.RouterLLMD, engine, 2))
			ctx := ctxT(t, 20*time.Second)
			obj, _ := d.Object(ctx)
			if obj.Status.RoleSummary != "1R2S" || *obj.Status.Roles[0].Endpoints.Serving.Value != 2 {
				t.Fatalf("status: %+v", obj.Status)
			}
			cfg, err := d.RouterConfig(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"epp.yaml", "envoy.yaml", "endpoint-selector", "endpoint-target-ports", "extra-args.json"} {
				if cfg[k] == "" {
					t.Errorf("ConfigMap key %s is empty", k)
				}
			}
			producer := "approx-prefix-cache-producer"
			if engine == api.EngineVLLM {
				producer = "precise-prefix-cache-producer"
			}
			if !strings.Contains(cfg["epp.yaml"], producer) {
				t.Errorf("epp.yaml has no %s:\n%s", producer, cfg["epp.yaml"])
			}
			base, err := d.OpenAIBaseURL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				chat(t, base, fmt.Sprint("hello ", i))
			}
			http.DefaultClient.CloseIdleConnections()
			logs, err := d.RouterLogs(ctx, clusters.LogOptions{Container: "epp"})
			if err != nil || !strings.Contains(logs, "Effective raw configuration") ||
				!strings.Contains(logs, "{PluginRef: prefix-cache-scorer, Weight: 3.00}") {
				t.Fatalf("epp log: %v\n%s", err, logs)
			}
			access, err := d.RouterLogs(ctx, clusters.LogOptions{Container: "envoy"})
			if err != nil || strings.Count(access, `"response_code":200,`) < 4 {
				t.Fatalf("envoy access log: %v\n%s", err, access)
			}
			rs, _ := d.Replicas(ctx)
			eventually(t, 5*time.Second, "per-endpoint series for both replicas", func() (bool, string) {
				snap, err := d.RouterMetrics(ctx)
				if err != nil {
					return false, err.Error()
				}
				s, _ := snap.Select("llm_d_epp_per_endpoint_queue_size")
				found := 0
				for _, r := range rs {
					for _, x := range s {
						if x.Labels["model_server_endpoint"] == r.Name+"-rank-0" {
							found++
						}
					}
				}
				return found == 2, fmt.Sprint(s)
			})
			seeds, err := d.(clusters.PickerSeeder).PickerSeeds(ctx)
			if err != nil || len(seeds) != 1 {
				t.Fatalf("seeds %v %v", seeds, err)
			}
			for _, s := range seeds {
				if s != 42 {
					t.Fatalf("picker seed %d, want the option's 42", s)
				}
			}
		})
	}
}

// prefixScores reads the epp's DEBUG "Calculated score" lines of the
// prefix-cache scorer (--v=4).
func prefixScores(t *testing.T, logs string) []float64 {
	t.Helper()
	var out []float64
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"Calculated score"`) || !strings.Contains(line, `"plugin":"prefix-cache-scorer/prefix-cache-scorer"`) {
			continue
		}
		var v struct {
			Score float64 `json:"score"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("score line %q: %v", line, err)
		}
		out = append(out, v.Score)
	}
	return out
}

// The cause of llm-d+vLLM's split, on the emulated mechanism: the engines
// publish their KV blocks under the operator's topic "kv@", whose missing
// model makes every block key differ from the request's, so the precise
// prefix scorer gives every candidate 0 even though the tokenizer Service
// answered and the blocks were cached. Under SGLang the approximate
// producer remembers where the prefix went and scores it.
func TestLLMDPrefixScoresFollowTheRenderedProducer(t *testing.T) {
	prefix := strings.Repeat("shared context about the weather. ", 16)
	for _, engine := range []string{api.EngineVLLM, api.EngineSGLang} {
		t.Run(engine, func(t *testing.T) {
			c := realCluster(t, sim.Options{PickerSeed: 7})
			d := deployReady(t, c, md("llmd", api.RouterLLMD, engine, 2, "--v=4"))
			ctx := ctxT(t, 20*time.Second)
			base, err := d.OpenAIBaseURL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 6 {
				chat(t, base, prefix+fmt.Sprint("question ", i))
			}
			http.DefaultClient.CloseIdleConnections()
			logs, err := d.RouterLogs(ctx, clusters.LogOptions{Container: "epp"})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(logs, "failed to prepare per request data") {
				t.Fatalf("a data producer failed (for vLLM: the tokenizer Service's /render):\n%s", logs)
			}
			scores := prefixScores(t, logs)
			if len(scores) != 12 {
				t.Fatalf("%d prefix-cache scores for 6 requests on 2 endpoints:\n%s", len(scores), logs)
			}
			var positive int
			for _, s := range scores {
				if s > 0 {
					positive++
				}
			}
			if engine == api.EngineVLLM && positive != 0 {
				t.Fatalf("precise producer scored %v; events under topic kv@ carry no model and match no request", scores)
			}
			if engine == api.EngineSGLang && positive < 5 {
				t.Fatalf("approximate producer scored %v; the 5 requests after the first share its prefix", scores)
			}
			if engine == api.EngineVLLM {
				// The blocks were there to be found: the engine's own cache hit.
				rs, _ := d.Replicas(ctx)
				var hits float64
				for _, r := range rs {
					snap, err := d.EngineMetrics(ctx, r)
					if err != nil {
						t.Fatal(err)
					}
					s, _ := snap.Select("vllm:prefix_cache_hits_total")
					for _, x := range s {
						hits += x.Value
					}
				}
				if hits == 0 {
					t.Fatal("no prefix-cache hit on either engine: the shared prefix never reached a cached block")
				}
			}
		})
	}
}

// metricsGate runs the real vLLM behind a proxy on the Pod's serving port
// whose /metrics stops answering (blocks until the caller gives up) once
// the Pod's name is in hang.
type metricsGate struct {
	mu   sync.Mutex
	hang map[string]bool
}

func (g *metricsGate) set(pod string) {
	g.mu.Lock()
	g.hang[pod] = true
	g.mu.Unlock()
}

func (g *metricsGate) hung(pod string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hang[pod]
}

func (g *metricsGate) program(real proc.Main) proc.Main {
	return func(ctx context.Context, c *proc.Container) int {
		front, err := c.Listen(":8000")
		if err != nil {
			return 1
		}
		back := make(chan string, 1)
		inner := *c
		inner.Listen = func(addr string) (net.Listener, error) {
			if _, port, _ := net.SplitHostPort(addr); port != "8000" {
				return c.Listen(addr) // the KV-event sockets, bound before the API server
			}
			ln, err := c.Listen("127.0.0.1:0")
			if err == nil {
				back <- ln.Addr().String()
			}
			return ln, err
		}
		done := make(chan int, 1)
		go func() { done <- real(ctx, &inner) }()
		var target *url.URL
		select {
		case addr := <-back:
			target = &url.URL{Scheme: "http", Host: addr}
		case code := <-done:
			front.Close()
			return code
		}
		rp := httputil.NewSingleHostReverseProxy(target)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" && g.hung(c.Pod.Name) {
				<-r.Context().Done()
				return
			}
			rp.ServeHTTP(w, r)
		})}
		go func() { _ = srv.Serve(front) }()
		code := <-done
		_ = srv.Close()
		return code
	}
}

// An engine whose /metrics stops answering: the EPP's scrape times out,
// the endpoint goes stale after --metrics-staleness-threshold and leaves
// llm_d_epp_ready_endpoints, keeps its last scraped queue, stays a routing
// candidate (v0.10.0 scores stale endpoints with their last metrics), and
// no request waits on the scrape.
func TestLLMDEngineWhoseMetricsStopAnsweringGoesStaleWithoutHangingRequests(t *testing.T) {
	gate := &metricsGate{hang: map[string]bool{}}
	c := realCluster(t, sim.Options{PickerSeed: 3, Programs: programs.Registry{VLLM: gate.program(vllm.Main)}})
	d := deployReady(t, c, md("llmd", api.RouterLLMD, api.EngineVLLM, 2, "--metrics-staleness-threshold=300ms",
		"--refresh-prometheus-metrics-interval=50ms"))
	ctx := ctxT(t, 30*time.Second)
	rs, _ := d.Replicas(ctx)
	ready := func(n int) func() (bool, string) {
		return func() (bool, string) {
			snap, err := d.RouterMetrics(ctx)
			if err != nil {
				return false, err.Error()
			}
			s, _ := snap.Select("llm_d_epp_ready_endpoints")
			return len(s) == 1 && s[0].Value == float64(n), fmt.Sprint(s)
		}
	}
	eventually(t, 10*time.Second, "2 fresh endpoints", ready(2))
	gate.set(rs[0].Name)
	eventually(t, 10*time.Second, "the silent engine to go stale", ready(1))

	base, err := d.OpenAIBaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	served := map[string]int{}
	for i := range 12 {
		start := time.Now()
		resp, err := client.Post(base+"/chat/completions", "application/json", strings.NewReader(
			`{"model":"Qwen/Qwen2.5-0.5B-Instruct","max_tokens":2,"messages":[{"role":"user","content":"q`+fmt.Sprint(i)+`"}]}`))
		if err != nil {
			t.Fatalf("request %d with a stale endpoint: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || time.Since(start) > 2*time.Second {
			t.Fatalf("request %d: %d after %s", i, resp.StatusCode, time.Since(start))
		}
	}
	// The gated engine's /metrics hangs for the suite as well; count the other.
	fresh, err := d.EngineMetrics(ctx, rs[1])
	if err != nil {
		t.Fatal(err)
	}
	s, _ := fresh.Select("vllm:request_success_total")
	for _, x := range s {
		served[rs[1].Name] += int(x.Value)
	}
	if served[rs[1].Name] == 12 {
		t.Fatalf("the stale endpoint got none of 12 requests; v0.10.0 keeps scoring it with its last metrics")
	}
	snap, err := d.RouterMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, _ = snap.Select("llm_d_epp_per_endpoint_queue_size")
	var kept bool
	for _, x := range s {
		kept = kept || x.Labels["model_server_endpoint"] == rs[0].Name+"-rank-0"
	}
	if !kept {
		t.Fatalf("the stale endpoint's last queue series is gone: %v", s)
	}
}

// A configuration the EPP rejects: --config-text beside the rendered
// --config-file passes admission (it is not an owned flag), the epp exits 1
// with its own validation error, RouterReady stays False and WaitReady
// stops with the hint instead of waiting out its timeout.
func TestLLMDRejectedConfigurationSurfacesAsRouterNotReady(t *testing.T) {
	c := realCluster(t, sim.Options{})
	ctx := ctxT(t, 20*time.Second)
	d, err := c.Deploy(ctx, md("llmd", api.RouterLLMD, api.EngineSGLang, 1, "--config-text=kind: EndpointPickerConfig"))
	if err != nil {
		t.Fatalf("--config-text is not an owned flag, admission takes it: %v", err)
	}
	err = d.WaitReady(ctx, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "epp container refused") {
		t.Fatalf("WaitReady: %v", err)
	}
	eventually(t, 5*time.Second, "RouterReady False naming the exit", func() (bool, string) {
		obj, _ := d.Object(ctx)
		rr := obj.Status.FindCondition(api.ConditionRouterReady)
		return rr != nil && rr.Status == "False" && strings.Contains(rr.Message, "last exit code 1"), fmt.Sprint(rr)
	})
	prev, err := d.RouterLogs(ctx, clusters.LogOptions{Container: "epp", Previous: true})
	if err != nil || !strings.Contains(prev, `both the \"config-file\" and \"config-text\" flags cannot be set at the same time`) ||
		!strings.Contains(prev, "Failed to validate flags") {
		t.Fatalf("epp's previous log: %v\n%s", err, prev)
	}
	if _, err := d.OpenAIBaseURL(ctx); err == nil {
		t.Fatal("a router whose epp never starts has no OpenAI endpoint")
	}
}

// A prefill/decode pair under llm-d-router: the decode Pod's routing proxy
// owns the serving port, its engine is scraped on 8200, and the EPP's
// split requests reach the prefill engine through the proxy while a short
// prompt stays on the decoder (docs/operator.md#engine-pods,
// docs/llmd.md#disaggregated-prefill-and-decode).
func TestLLMDPrefillDecodeRunsThroughTheRoutingProxy(t *testing.T) {
	c := realCluster(t, sim.Options{PickerSeed: 42})
	m := md("llmdpd", api.RouterLLMD, api.EngineVLLM, 1)
	m.Spec.Roles = []api.Role{
		{Name: "prefill", Kind: api.RoleKindPrefill, Replicas: api.Ptr[int32](1), InstanceType: "sim-gpu"},
		{Name: "decode", Kind: api.RoleKindDecode, Replicas: api.Ptr[int32](1), InstanceType: "sim-gpu"},
	}
	d := deployReady(t, c, m)
	ctx := ctxT(t, 20*time.Second)
	base, err := d.OpenAIBaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	post := func(prompt string) {
		t.Helper()
		postOK(t, base+"/completions", `{"model":"Qwen/Qwen2.5-0.5B-Instruct","max_tokens":4,"prompt":"`+prompt+`"}`)
	}
	post("Hi")
	post(strings.Repeat("a long prompt no engine has seen ", 12))
	http.DefaultClient.CloseIdleConnections()

	reps, err := d.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range reps {
		if r.Kind == api.RoleKindDecode && (r.Port != 8000 || r.MetricsPort != 8200) {
			t.Errorf("decoder: serving port %d, metrics port %d; want 8000 (the proxy), 8200 (the engine)", r.Port, r.MetricsPort)
		}
		s, err := d.EngineMetrics(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		got[r.Kind], _ = s.Sum("vllm:request_success_total")
	}
	if got[api.RoleKindPrefill] != 1 || got[api.RoleKindDecode] != 2 {
		t.Errorf("engine requests %v: want the long prompt's prefill leg on prefill, both on decode", got)
	}
}

// GET /v1/models carries no body, so Envoy's ext_proc sees end of stream
// on the request headers and the epp sends it to a random endpoint
// (fallbackToRandomEndpoint, docs/llmd.md#data-path): every answer is an
// engine's own list, and over a few GETs both replicas answer.
func TestLLMDRoutesABodilessGETToARandomEngine(t *testing.T) {
	c := realCluster(t, sim.Options{PickerSeed: 42})
	d := deployReady(t, c, md("llmd-models", api.RouterLLMD, api.EngineVLLM, 2))
	ctx := ctxT(t, 20*time.Second)
	base, err := d.OpenAIBaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const gets = 16
	for range gets {
		resp, err := http.Get(base + "/models")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var list struct {
			Object string `json:"object"`
			Data   []struct {
				ID      string `json:"id"`
				OwnedBy string `json:"owned_by"`
			} `json:"data"`
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &list) != nil ||
			list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "Qwen/Qwen2.5-0.5B-Instruct" || list.Data[0].OwnedBy != "vllm" {
			t.Fatalf("GET /v1/models through llm-d-router: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	rs, err := d.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "every GET in the access log, on both replicas", func() (bool, string) {
		access, err := d.RouterLogs(ctx, clusters.LogOptions{Container: api.ContainerEnvoy})
		if err != nil {
			return false, err.Error()
		}
		per := map[string]int{}
		for _, line := range strings.Split(access, "\n") {
			var e struct {
				Method   string `json:"method"`
				Path     string `json:"path"`
				Code     int    `json:"response_code"`
				Upstream string `json:"upstream_host"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Method == "GET" && e.Path == "/v1/models" && e.Code == 200 {
				per[e.Upstream]++
			}
		}
		both := len(per) == len(rs)
		for _, r := range rs {
			both = both && per[net.JoinHostPort(r.IP, fmt.Sprint(r.Port))] > 0
		}
		return both && len(per) > 0 && sum(per) == gets, fmt.Sprint(per)
	})
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
