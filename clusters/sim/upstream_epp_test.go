package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// builtEPP is make upstream-llmd's build, or a skip naming why there is
// none (the workplace CI cannot fetch llm-d's sources: not a failure there).
func builtEPP(t *testing.T) *upstream.EPPInstall {
	t.Helper()
	in, err := upstream.LoadEPP("")
	if err != nil {
		t.Skipf("no built EPP: %v", err)
	}
	return in
}

// llm-d-router's own EPP as the epp container, on both engines: the
// deployment becomes Ready on the observer view the sim serves from the
// EPP's own datastore, requests through envoy reach both replicas by the
// EPP's picks, the log is the binary's, and the report names the build.
func TestBuiltEPPServesBothEngines(t *testing.T) {
	in := builtEPP(t)
	for _, engine := range []string{api.EngineVLLM, api.EngineSGLang} {
		t.Run(engine, func(t *testing.T) {
			c := realCluster(t, sim.Options{LLMD: in})
			d := deployReady(t, c, md("llmd", api.RouterLLMD, engine, 2))
			ctx := ctxT(t, 30*time.Second)
			obj, _ := d.Object(ctx)
			if obj.Status.RoleSummary != "1R2S" || *obj.Status.Roles[0].Endpoints.Serving.Value != 2 {
				t.Fatalf("status from the built EPP's membership: %+v", obj.Status)
			}
			base, err := d.OpenAIBaseURL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				chat(t, base, strings.Repeat("x", i))
			}
			logs, err := d.RouterLogs(ctx, clusters.LogOptions{Container: "epp"})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"msg":"GIE build","commit-sha":"` + in.RouterCommit, `EPP starting (file discovery mode)`,
				`"discoveryPlugin":"` + upstream.FileDiscoveryPlugin} {
				if !strings.Contains(logs, want) {
					t.Errorf("the epp log lacks %s:\n%.3000s", want, logs)
				}
			}
			access, err := d.RouterLogs(ctx, clusters.LogOptions{Container: "envoy"})
			if err != nil {
				t.Fatal(err)
			}
			hosts := map[string]bool{}
			for _, l := range strings.Split(access, "\n") {
				if i := strings.Index(l, `"upstream_host":"`); i >= 0 {
					hosts[strings.SplitN(l[i+17:], `"`, 2)[0]] = true
				}
			}
			if len(hosts) != 2 {
				t.Errorf("20 chats through the built EPP reached %v, want both replicas", hosts)
			}
			env, err := c.Describe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range env.Pairs {
				if p.Pair.Router == api.RouterLLMD && p.Supported && (p.RouterCode == nil || p.RouterCode.Commit != in.RouterCommit) {
					t.Errorf("%s's router code %+v does not name the build", p.Pair, p.RouterCode)
				}
			}
		})
	}
}
