package sim_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
)

func engineOf(router string) string {
	if router == api.RouterSGLang {
		return api.EngineSGLang
	}
	return api.EngineVLLM
}

func TestRealRouterReadyServesAndCrashesOnBadPolicy(t *testing.T) {
	for _, router := range []string{api.RouterVLLM, api.RouterSGLang} {
		t.Run(router, func(t *testing.T) {
			c := realCluster(t, sim.Options{})
			d := deployReady(t, c, md("real", router, engineOf(router), 2))
			ctx := ctxT(t, 20*time.Second)
			logs, err := d.RouterLogs(ctx, clusters.LogOptions{})
			// The process binds the Pod's own address (the bind-address row).
			if err != nil || !regexp.MustCompile(`Starting router on 127\.[0-9.]+:8081`).MatchString(logs) ||
				!strings.Contains(logs, "policy: CacheAware { cache_threshold: 0.3") {
				t.Fatalf("banner: %v\n%s", err, logs)
			}
			base, err := d.OpenAIBaseURL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(
				`{"model":"Qwen/Qwen2.5-0.5B-Instruct","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("chat through the router: %d %s", resp.StatusCode, body)
			}
			if _, err := d.RouterMetrics(ctx); err != nil {
				t.Fatalf("router metrics: %v", err)
			}
			http.DefaultClient.CloseIdleConnections()

			bad, err := c.Deploy(ctx, md("bad", router, engineOf(router), 1, "--policy", "roundrobin"))
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "exit 2 and CrashLoopBackOff", func() (bool, string) {
				ps, _ := bad.RouterState(ctx)
				return len(ps) == 1 && ps[0].LastExitCode != nil && *ps[0].LastExitCode == 2 &&
					ps[0].Waiting == "CrashLoopBackOff", fmt.Sprint(ps)
			})
			prev, _ := bad.RouterLogs(ctx, clusters.LogOptions{Previous: true})
			if !strings.Contains(prev, "error: invalid value 'roundrobin' for '--policy <POLICY>'") ||
				!strings.Contains(prev, "tip: a similar value exists: 'round_robin'") {
				t.Fatalf("clap error in the previous log:\n%s", prev)
			}
		})
	}
}

func TestRealPrefillDecodePair(t *testing.T) {
	for _, router := range []string{api.RouterVLLM, api.RouterSGLang} {
		t.Run(router, func(t *testing.T) {
			c := realCluster(t, sim.Options{})
			m := md("pd", router, engineOf(router), 1)
			m.Spec.Roles = []api.Role{
				{Name: "prefill", Kind: api.RoleKindPrefill, InstanceType: "sim-gpu"},
				{Name: "decode", Kind: api.RoleKindDecode, InstanceType: "sim-gpu"},
			}
			d := deployReady(t, c, m)
			obj, _ := d.Object(ctxT(t, 5*time.Second))
			if obj.Status.RoleSummary != "1R1P1D" {
				t.Fatalf("summary %q", obj.Status.RoleSummary)
			}
			ctx := ctxT(t, 10*time.Second)
			base, err := d.OpenAIBaseURL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(base+"/completions", "application/json", strings.NewReader(
				`{"model":"Qwen/Qwen2.5-0.5B-Instruct","prompt":"hello","max_tokens":4}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			if resp.StatusCode != 200 {
				t.Fatalf("P/D completion: %d %s", resp.StatusCode, body)
			}
		})
	}
}
