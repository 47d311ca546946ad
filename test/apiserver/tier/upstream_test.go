package tier

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/upstream"
	"github.com/gpustack/routing-conformance/sim/upstream/upstreamtest"
	"github.com/gpustack/routing-conformance/test/apiserver/stack"
	"github.com/gpustack/routing-conformance/test/apiserver/suitecompare"
)

// envUpstreamFilter selects the claims the upstream run qualifies.
const envUpstreamFilter = "APISERVER_UPSTREAM_FILTER"

// upstreamFilter is, by default, the claims that change membership, the
// defaults' banner (free: the same deployment) and both P/D pools, whose
// banners list no URLs under discovery. The routers discover their workers
// through this API server by the rendered selectors, as on a cluster.
func upstreamFilter() string {
	if v, ok := os.LookupEnv(envUpstreamFilter); ok {
		return v
	}
	return "feature:switch || feature:killengine || feature:deleterouter || feature:routerreplicas || " +
		"feature:defaults || feature:pdpools"
}

// The routing suite on E2E_TARGET=kube against the tier's API server, with
// the routers built from source (make routers) as the node's router
// containers, given the API server's kubeconfig: their own service
// discovery, by the selectors the operator renders, finds the engines
// through a real kube-apiserver rather than the plain sim's Pods API.
// Every selected row passes.
func TestBuiltRoutersDiscoverThroughTheAPIServer(t *testing.T) {
	in := upstreamtest.Install(t)
	ctx := t.Context()
	repo, err := suitecompare.Repo(".")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bin, err := suitecompare.Build(ctx, repo, work)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(work, "e2e-tier.yaml")
	if err := suitecompare.WriteConfig(repo, cfg); err != nil {
		t.Fatal(err)
	}
	knobs, err := suitecompare.SimKnobs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The stack runs the built routers with its API server's kubeconfig;
	// Started records each process.
	kubeconfig := filepath.Join(work, "router.kubeconfig")
	var mu sync.Mutex
	var started []upstream.Start
	opts := upstream.Options{Kubeconfig: kubeconfig, Started: func(s upstream.Start) {
		mu.Lock()
		defer mu.Unlock()
		started = append(started, s)
	}}
	s := stack.Start(t, stack.Options{EngineEnv: stack.EngineEnv(knobs), Programs: programs.Registry{
		VLLMRouter:    in.Program(api.RouterVLLM, opts),
		SGLangGateway: in.Program(api.RouterSGLang, opts),
	}})
	b, err := os.ReadFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		t.Fatal(err)
	}

	filter := upstreamFilter()
	t.Logf("claims: %q (%s); routers: %s", filter, envUpstreamFilter, strings.Join(upstream.Routers(), ", "))
	r := suitecompare.Run{Binary: bin, Repo: repo, Artifacts: artifactsDir(t, "kube-upstream"), Timeout: suiteTimeout, LabelFilter: filter,
		Env: map[string]string{"E2E_TARGET": "kube", "E2E_KUBECONFIG": s.Kubeconfig, "E2E_CONFIG": cfg,
			"E2E_ROUTERS": strings.Join(upstream.Routers(), ",")}}.Exec(ctx)
	t.Logf("kube-upstream: %s in %s", resultOf(r), r.Wall.Round(time.Second))
	if r.Report == nil {
		t.Fatalf("no report: %v\n%s", r.Err, tail(r.Output, 60))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) == 0 {
		t.Fatal("no router process was started: the run did not use the built routers")
	}
	checkUpstreamRows(t, r.Report)
	// Nothing left: every Pod, so every upstream process, is gone once the
	// stack stops (its Stop checks the node is empty).
}

// checkUpstreamRows: each row of the built routers' pairs with a result passes.
func checkUpstreamRows(t *testing.T, rep *report.Report) {
	t.Helper()
	ran := 0
	for _, c := range rep.Claims {
		for _, row := range c.Rows {
			router, _, _ := strings.Cut(row.Pair, "+")
			if !upstream.Supports(router) || row.Result == report.ResultNotApplicable || row.Result == report.ResultNotRun {
				continue // llm-d-router is not in the run
			}
			ran++
			if row.Result != report.ResultPass {
				t.Errorf("%s / %s: %s with the built routers discovering through the API server, want PASS: %s",
					c.Name, row.Pair, row.Result, strings.Join(row.Reasons, "; "))
			} else {
				t.Logf("%s / %s: %s", c.Name, row.Pair, row.Result)
			}
		}
	}
	if ran == 0 {
		t.Errorf("no row ran: %+v", rep.Statistics)
	}
}
