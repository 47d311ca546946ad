package framework

// Unit tests of the framework's waits: plain Go tests that do not run the
// Ginkgo suite (make unit runs every test here but TestRouting).

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/exposition"
	"github.com/gpustack/routing-conformance/metrics"
)

// scrapingDeployment scrapes each replica's /metrics at its URL with
// metrics.Scrape's own default timeout (10 s), far longer than the wait.
type scrapingDeployment struct {
	clusters.Deployment // nil: only EngineMetrics is called
	urls                map[string]string
}

func (d scrapingDeployment) EngineMetrics(ctx context.Context, r clusters.Replica) (metrics.Snapshot, error) {
	return metrics.Scrape(ctx, d.urls[r.Name], metrics.WithSource(r.Name))
}

func TestSplitWaitOnAHungMetricsEndpointFailsWithinItsIntervalNamingThePod(t *testing.T) {
	RegisterTestingT(t) // the waits use the global Gomega; failures are intercepted below
	ok := exposition.Serve(t, exposition.VLLM("m", map[string]int{"stop": 3}, 0, 0, 0, 0))
	hung := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select { // a /metrics that never answers until the test ends
		case <-r.Context().Done():
		case <-hung:
		}
	}))
	defer hang.Close()
	defer close(hung)

	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.Parse("e2e.yaml", []byte("target: sim\nsim:\n  intervals:\n    metricshang/wait-metrics: [1s, 20ms]\n"),
		t.TempDir(), noEnv, "metricshang")
	if err != nil {
		t.Fatal(err)
	}
	iv, err := cfg.Interval("metricshang", config.OpWaitMetrics)
	if err != nil || iv.Timeout.D() != time.Second {
		t.Fatalf("metricshang/wait-metrics = %v, %v; the test needs 1s", iv, err)
	}
	rs := []clusters.Replica{{Name: "md-server-0"}, {Name: "md-server-1"}}
	dep := scrapingDeployment{urls: map[string]string{"md-server-0": ok.URL, "md-server-1": hang.URL + "/metrics"}}
	before := map[string]metrics.Snapshot{}
	for _, r := range rs {
		before[r.Name] = metrics.Snapshot{}
	}

	start := time.Now()
	failures := InterceptGomegaFailures(func() {
		in := Spec{Target: Target{Config: cfg}, Claim: "metricshang", Pair: api.Pair{Router: "vllm-router", Engine: "vllm"}}
		in.SplitOnce(context.Background(), dep, rs, before, assertions.HaveTotal(3), "account for every request sent")
	})
	took := time.Since(start)

	if len(failures) == 0 {
		t.Fatal("a split wait on a /metrics that never answers did not fail")
	}
	if !strings.Contains(failures[0], "md-server-1") || !strings.Contains(failures[0], "deadline exceeded") {
		t.Errorf("the failure does not name the hung Pod md-server-1 and its deadline:\n%s", failures[0])
	}
	// A bound on a hang, not a performance figure: without the wait's
	// deadline on each scrape this takes the scrape's own 10 s.
	if limit := iv.Timeout.D() + HangSlack; took >= limit {
		t.Errorf("the wait failed after %s, past its interval %s + %s", took, iv.Timeout.D(), HangSlack)
	}
}
