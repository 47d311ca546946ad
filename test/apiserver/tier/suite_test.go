package tier

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/sim/upstream"
	"github.com/gpustack/routing-conformance/test/apiserver/rbac"
	"github.com/gpustack/routing-conformance/test/apiserver/stack"
	"github.com/gpustack/routing-conformance/test/apiserver/suitecompare"
)

// suiteTimeout bounds one run of the routing suite.
const suiteTimeout = 15 * time.Minute

// envSuiteFilter selects the claims the tier runs: the documented claims
// by default, the suite the issue qualifies on kube and short enough for a
// cold CI run; empty runs every claim (extended and resilience too, about
// ten minutes per kube run on a 2-core machine).
const envSuiteFilter = "APISERVER_SUITE_FILTER"

func suiteFilter() string {
	if v, ok := os.LookupEnv(envSuiteFilter); ok {
		return v
	}
	return "claim:documented"
}

// tierRouters are the routers the sim supports (whatever main supports at
// the time): the tier runs every one of them, since the sim's programs run
// behind the API server unchanged, and the runs are compared row by row.
func tierRouters(t *testing.T) []string {
	t.Helper()
	in, err := upstream.Load("")
	if err != nil {
		// Without the build the tier would qualify llm-d-router alone and
		// read as the whole tier.
		t.Fatalf("the tier qualifies every router the sim runs: %v", err)
	}
	c := sim.New(sim.Options{Routers: in})
	defer c.Close(context.Background())
	env, err := c.Describe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range env.Pairs {
		if p.Supported && !slices.Contains(out, p.Router) {
			out = append(out, p.Router)
		}
	}
	for _, r := range api.Routers {
		if !slices.Contains(out, r) {
			t.Logf("router %s is not qualified on the tier (the sim does not run it)", r)
		}
	}
	return out
}

// artifactsDir is where a run's report goes: $ARTIFACTS/apiserver-tier/<run>
// when CI sets ARTIFACTS, else the test's temporary directory.
func artifactsDir(t *testing.T, run string) string {
	base := t.TempDir()
	if a := os.Getenv("ARTIFACTS"); a != "" {
		base = filepath.Join(a, "apiserver-tier")
	}
	dir := filepath.Join(base, run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The documented routing suite, unchanged, on E2E_TARGET=kube against the
// tier's API server, once as cluster admin and once as the ServiceAccount of
// deploy/rbac/ applied for real: both qualify the same rows as a sim run of
// the same binary, and leave nothing behind.
func TestRoutingSuiteOnKube(t *testing.T) {
	ctx := t.Context()
	repo, err := suitecompare.Repo(".")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	start := time.Now()
	bin, err := suitecompare.Build(ctx, repo, work)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built the suite in %s", time.Since(start).Round(time.Second))
	cfg := filepath.Join(work, "e2e-tier.yaml")
	if err := suitecompare.WriteConfig(repo, cfg); err != nil {
		t.Fatal(err)
	}
	knobs, err := suitecompare.SimKnobs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	routers := strings.Join(tierRouters(t), ",")
	// The engines behind the API server run with the sim run's knobs: the
	// held-request claims need requests as long as the sim's.
	s := stack.Start(t, stack.Options{EngineEnv: stack.EngineEnv(knobs)})
	objs, err := rbac.Objects(filepath.Join(repo, "deploy", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Apply(ctx, s.Config, objs); err != nil {
		t.Fatal(err)
	}
	saConfig := filepath.Join(work, "sa.kubeconfig")
	if err := rbac.Kubeconfig(ctx, s.Config, saConfig); err != nil {
		t.Fatal(err)
	}

	// The three runs go at once: each has its own run id and namespaces,
	// and the kube runs spend most of their time waiting (a namespace is
	// finalized no sooner than 5 s after its deletion, the namespace
	// controller's grace for HA API servers).
	runs := map[string]map[string]string{
		"sim":                 {"E2E_TARGET": "sim"},
		"kube-admin":          {"E2E_TARGET": "kube", "E2E_KUBECONFIG": s.Kubeconfig},
		"kube-serviceaccount": {"E2E_TARGET": "kube", "E2E_KUBECONFIG": saConfig},
	}
	filter := suiteFilter()
	t.Logf("claims: %q (%s)", filter, envSuiteFilter)
	results := map[string]suitecompare.Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, env := range runs {
		env["E2E_CONFIG"], env["E2E_ROUTERS"] = cfg, routers
		artifacts := artifactsDir(t, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := suitecompare.Run{Binary: bin, Repo: repo, Env: env, Artifacts: artifacts, Timeout: suiteTimeout,
				LabelFilter: filter}.Exec(ctx)
			mu.Lock()
			results[name] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, name := range slices.Sorted(maps.Keys(runs)) {
		r := results[name]
		t.Logf("%s: %s in %s", name, resultOf(r), r.Wall.Round(time.Second))
		if r.Err != nil {
			t.Errorf("%s run failed: %v\nfailed specs: %s\n%s", name, r.Err, failures(r), tail(r.Output, 60))
		}
	}
	reference := results["sim"]
	if reference.Report == nil {
		t.Fatal("the sim run wrote no report; nothing to compare with")
	}
	for _, name := range []string{"kube-admin", "kube-serviceaccount"} {
		checkRun(t, s, name, reference, results[name])
	}
}

// checkRun: the kube run qualified the reference's rows with the same
// results, on the kube target, and left no namespace of its run and no Pod
// on the node.
func checkRun(t *testing.T, s *stack.Stack, name string, reference, got suitecompare.Result) {
	t.Helper()
	if got.Report == nil {
		t.Errorf("%s: no report.json", name)
		return
	}
	if got.Report.Environment.Target != "kube" {
		t.Errorf("%s: report target %q, want kube", name, got.Report.Environment.Target)
	}
	if got.Report.Statistics.Passed == 0 {
		t.Errorf("%s: no spec passed: %+v", name, got.Report.Statistics)
	}
	diff, unsupported := suitecompare.Compare(reference.Report, got.Report)
	if len(diff) > 0 {
		t.Errorf("%s qualifies differently from the sim run:\n  %s", name, strings.Join(diff, "\n  "))
	}
	if len(unsupported) > 0 {
		t.Logf("%s skips what its target cannot inject (not a pass):\n  %s", name, strings.Join(unsupported, "\n  "))
	}
	left, err := s.Kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{
		LabelSelector: kube.LabelManagedBy + "=" + kube.ManagedByValue})
	if err != nil {
		t.Errorf("%s: list namespaces: %v", name, err)
	} else if len(left.Items) > 0 {
		t.Errorf("%s left namespaces behind: %v", name, names(left.Items))
	}
	if pods := s.Node.Kubelet().ListStatus("", nil); len(pods) > 0 {
		t.Errorf("%s left %d Pods running on the node", name, len(pods))
	}
}

func resultOf(r suitecompare.Result) string {
	if r.Report == nil {
		return "no report"
	}
	st := r.Report.Statistics
	return fmt.Sprintf("%s (%d passed, %d skipped, %d failed)", r.Report.Result, st.Passed, st.Skipped, st.Failed)
}

func failures(r suitecompare.Result) string {
	if r.Report == nil {
		return "(no report)"
	}
	return strings.Join(suitecompare.Failures(r.Report), "; ")
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
