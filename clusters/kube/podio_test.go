package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/metrics"
)

const routerMetricsA = `# HELP vllm_router_requests_total Total number of requests
# TYPE vllm_router_requests_total counter
vllm_router_requests_total{route="/v1/chat/completions"} 7
# HELP vllm_router_processed_requests_total Requests processed per worker
# TYPE vllm_router_processed_requests_total counter
vllm_router_processed_requests_total{worker="http://10.0.1.1:8000"} 7
`

const routerMetricsB = `# HELP vllm_router_requests_total Total number of requests
# TYPE vllm_router_requests_total counter
vllm_router_requests_total{route="/v1/chat/completions"} 5
`

const engineMetrics = `# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen2.5-0.5B-Instruct"} 60
`

func TestRouterMetricsMergeEveryRouterPodThroughThePodProxy(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	e.addPod(routerPod(d.ns, d.name, "md-router-b", "u2"))
	e.podAPI.setProxy(d.ns, "md-router-a:9090", "/metrics", routerMetricsA)
	e.podAPI.setProxy(d.ns, "md-router-b:9090", "/metrics", routerMetricsB)

	snap, err := d.RouterMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	total, err := snap.Sum("vllm_router_requests_total")
	if err != nil || total != 12 {
		t.Errorf("sum over both router Pods = %v, %v; want 12", total, err)
	}
	a, err := snap.Sum("vllm_router_requests_total", metrics.Eq(metrics.SourceLabel, "md-router-a"))
	if err != nil || a != 7 {
		t.Errorf("router a alone = %v, %v", a, err)
	}
	var paths []string
	for _, u := range e.podAPI.seen() {
		paths = append(paths, u.Path)
	}
	want := "/api/v1/namespaces/" + d.ns + "/pods/md-router-a:9090/proxy/metrics"
	if !strings.Contains(strings.Join(paths, " "), want) {
		t.Errorf("requests %v do not include %s", paths, want)
	}
}

func TestEngineMetricsUseThePrometheusPortAnnotation(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	// An llm-d decoder: the routing proxy owns 8000, the engine moved to 8200.
	e.addPod(enginePod(d.ns, d.name, "md-decode-a", "10.0.1.1", func(p *corev1.Pod) {
		p.Annotations[api.AnnotationPromPort] = "8200"
	}))
	e.podAPI.setProxy(d.ns, "md-decode-a:8200", "/metrics", engineMetrics)
	snap, err := d.EngineMetrics(context.Background(), clusters.Replica{Name: "md-decode-a", Port: 8000, MetricsPort: 8200})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := snap.Sum("vllm:request_success_total"); err != nil || v != 60 {
		t.Errorf("vllm:request_success_total = %v, %v", v, err)
	}
	if snap.Families["vllm:request_success_total"].Type != "counter" {
		t.Errorf("family %+v", snap.Families["vllm:request_success_total"])
	}
}

func TestMetricsProxyFailureNamesThePod(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	_, err := d.RouterMetrics(context.Background())
	if err == nil || !strings.Contains(err.Error(), "md-router-a:9090") || !strings.Contains(err.Error(), "API server proxy") {
		t.Errorf("RouterMetrics = %v", err)
	}
}

func TestRouterLogsCurrentAndPrevious(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1", crashLooping(2)))
	e.podAPI.setLog(d.ns, "md-router-a", "router", false, "")
	clapErr := "error: invalid value 'round_robbin' for '--policy <POLICY>'\n  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n"
	e.podAPI.setLog(d.ns, "md-router-a", "router", true, clapErr)

	prev, err := d.RouterLogs(context.Background(), clusters.LogOptions{Previous: true})
	if err != nil {
		t.Fatal(err)
	}
	if prev != clapErr {
		t.Errorf("previous logs %q", prev)
	}
	cur, err := d.RouterLogs(context.Background(), clusters.LogOptions{})
	if err != nil || cur != "" {
		t.Errorf("current logs %q, %v", cur, err)
	}
	var sawPrevious bool
	for _, u := range e.podAPI.seen() {
		if strings.HasSuffix(u.Path, "/pods/md-router-a/log") && u.Query().Get("previous") == "true" && u.Query().Get("container") == "router" {
			sawPrevious = true
		}
	}
	if !sawPrevious {
		t.Error("no pods/log request with previous=true&container=router")
	}
}

func TestRouterLogsPickTheLLMDContainerAndSince(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: api.ContainerEnvoy}, {Name: api.ContainerEPP}}
	}))
	e.podAPI.setLog(d.ns, "md-router-a", "epp", false, "epp started\n")
	e.podAPI.setLog(d.ns, "md-router-a", "envoy", false, `{"response_code":200}`+"\n")
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	out, err := d.RouterLogs(context.Background(), clusters.LogOptions{Since: since})
	if err != nil || out != "epp started\n" {
		t.Fatalf("epp logs %q, %v", out, err)
	}
	out, err = d.RouterLogs(context.Background(), clusters.LogOptions{Container: "envoy"})
	if err != nil || !strings.Contains(out, "response_code") {
		t.Fatalf("envoy logs %q, %v", out, err)
	}
	var sinceSent string
	for _, u := range e.podAPI.seen() {
		if u.Query().Get("container") == "epp" {
			sinceSent = u.Query().Get("sinceTime")
		}
	}
	if sinceSent != "2026-12-02T10:00:00Z" {
		t.Errorf("sinceTime %q", sinceSent)
	}
}

func TestRouterLogsWithoutPreviousContainerIsAnError(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	_, err := d.RouterLogs(context.Background(), clusters.LogOptions{Previous: true})
	if err == nil || !strings.Contains(err.Error(), "(previous)") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("RouterLogs(previous) = %v", err)
	}
}

// During a rollout the old router Pod serves while the new one crash-loops:
// its previous log is there, the old Pod's is not, and that is no error
// (found by the apiserver tier; the sim answers the same).
func TestRouterLogsPreviousDuringARolloutReadsThePodThatCrashed(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-old", "u1"))
	e.addPod(routerPod(d.ns, d.name, "md-router-new", "u2", crashLooping(2)))
	clapErr := "error: invalid value 'round_robbin' for '--policy <POLICY>'\n"
	e.podAPI.setLog(d.ns, "md-router-new", "router", true, clapErr)
	e.podAPI.setLog(d.ns, "md-router-old", "router", false, "serving\n")
	e.podAPI.setLog(d.ns, "md-router-new", "router", false, "")

	prev, err := d.RouterLogs(context.Background(), clusters.LogOptions{Previous: true})
	if err != nil {
		t.Fatal(err)
	}
	if prev != "==> pod/md-router-new <==\n"+clapErr {
		t.Errorf("previous logs %q", prev)
	}
	cur, err := d.RouterLogs(context.Background(), clusters.LogOptions{})
	if err != nil || cur != "==> pod/md-router-new <==\n==> pod/md-router-old <==\nserving\n" {
		t.Errorf("current logs %q, %v", cur, err)
	}
}
