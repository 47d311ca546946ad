package sim_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
)

func chat(t *testing.T, base, content string) {
	t.Helper()
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(
		`{"model":"Qwen/Qwen2.5-0.5B-Instruct","max_tokens":4,"messages":[{"role":"user","content":"`+content+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat through llm-d-router: %d %s", resp.StatusCode, body)
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
