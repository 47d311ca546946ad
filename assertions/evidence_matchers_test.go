package assertions_test

import (
	"errors"
	"testing"
	"time"

	. "github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/metrics"
)

func TestHaveFailedAtMostShowsTheBoundAndItsDerivation(t *testing.T) {
	f := FailedRequests{Action: "deleted router Pod r-1", Requests: 40, Failed: 12, First: []string{"at +0.120s refused status 0: connection refused"}}
	mustPass(t, failure(f, HaveFailedAtMost(12, "in flight (concurrency) + rate x fault-window (20/s x 500ms)", "the Service has no Ready endpoint"), false))
	mustContain(t, failure(f, HaveFailedAtMost(9, "in flight (concurrency) + rate x fault-window (20/s x 330ms)", "the Service has no Ready endpoint"), false),
		`Expected at most 9 of the 40 requests during "deleted router Pod r-1" to fail, but 12 did`,
		"bound 9 = in flight (concurrency) + rate x fault-window (20/s x 330ms)",
		"derivation: the Service has no Ready endpoint",
		"at +0.120s refused status 0: connection refused")
	mustContain(t, failure("x", HaveFailedAtMost(1, "", ""), false), "expects an assertions.FailedRequests, got string")
	mustPass(t, failure(FailedRequests{Action: "killing the router", Requests: 40, Failed: 40}, HaveFailedAtMost(-1, "none", "the bound is on time"), false))
}

func code(c int32) *int32 { return &c }

func TestNotBeReadyShowsTheState(t *testing.T) {
	crashed := DeploymentState{Name: "md", Phase: "Pending", RouterReady: "False", RouterReadyReason: "NoReadyReplicas",
		RouterPods: []clusters.RouterPod{{Name: "md-router-1", Restarts: 3, LastExitCode: code(2), Waiting: "CrashLoopBackOff"}}}
	mustPass(t, failure(crashed, NotBeReady(), false))
	ready := crashed
	ready.Phase, ready.RouterReady = "Ready", "True"
	ready.RouterPods = []clusters.RouterPod{{Name: "md-router-1", Ready: true}}
	mustContain(t, failure(ready, NotBeReady(), false),
		"Expected the deployment not to be Ready, but phase is Ready, RouterReady is True, router Pod md-router-1 is Ready",
		`md: phase "Ready", RouterReady "True"`, "router Pod", "md-router-1")
}

func TestHaveExitedWithShowsThePod(t *testing.T) {
	p := clusters.RouterPod{Name: "md-router-1", Restarts: 2, LastExitCode: code(1), Waiting: "CrashLoopBackOff"}
	mustPass(t, failure(p, HaveExitedWith(1), false))
	mustContain(t, failure(p, HaveExitedWith(2), false),
		"Expected the router to have exited with code 2", "router Pod md-router-1: exit code 1, 2 restarts")
	mustContain(t, failure(clusters.RouterPod{Name: "r"}, HaveExitedWith(2), false), "r: no exit yet")
}

func TestHavePodsReplacedShowsEveryUIDBeforeAndAfter(t *testing.T) {
	before := map[string]string{"md-server-0": "u0", "md-server-1": "u1"}
	mustPass(t, failure(map[string]string{"md-server-0": "u0", "md-server-1": "u1"}, HavePodsReplaced(before), false))
	mustPass(t, failure(map[string]string{"md-server-0": "u0", "md-server-2": "u2"}, HavePodsReplaced(before, "md-server-1"), false))
	mustContain(t, failure(map[string]string{"md-server-0": "u0", "md-server-1": "u9"}, HavePodsReplaced(before), false),
		"Expected the Pods to be the same Pods, but md-server-1 replaced (new UID)", "md-server-1  u1", "u9", "<- replaced (new UID)")
	mustContain(t, failure(map[string]string{"md-server-0": "u0", "md-server-1": "u1"}, HavePodsReplaced(before, "md-server-1"), false),
		"md-server-1 should be gone", "0 new Pods for 1 replaced")
}

func TestHaveAllAnsweredMarksEachDifference(t *testing.T) {
	ok := Answer{Request: "chat #0", Status: 503, Fields: map[string]string{"error.code": "no_available_workers"}}
	bad := Answer{Request: "chat #1", Status: 200, Fields: map[string]string{"error.code": ""}}
	want := map[string]string{"error.code": "no_available_workers"}
	mustPass(t, failure([]Answer{ok, ok}, HaveAllAnswered(503, want), false))
	mustContain(t, failure([]Answer{ok, bad}, HaveAllAnswered(503, want), false),
		`Expected every answer to be status 503 with error.code "no_available_workers", but 1 of 2 differ`,
		"chat #1", `<- status, error.code`)
	mustContain(t, failure([]Answer{}, HaveAllAnswered(200, nil), false), "no answers to judge")
}

func TestHaveEachBeenRefusedShowsEveryCreate(t *testing.T) {
	refused := Create{Args: []string{"--port", "1"}, Refused: true, Field: "spec.router.extraArgs[0]", Message: `"--port" is set by the operator`, Want: `"--port" is set by the operator`}
	admitted := Create{Args: []string{"--host=1"}, Message: "admitted", Want: `"--host" is set by the operator`}
	other := Create{Args: []string{"--selector", "1"}, Refused: true, Field: "spec.router", Message: "no", Want: "yes"}
	mustPass(t, failure([]Create{refused}, HaveEachBeenRefused("spec.router.extraArgs[0]"), false))
	mustContain(t, failure([]Create{refused, admitted, other}, HaveEachBeenRefused("spec.router.extraArgs[0]"), false),
		"but 2 of 3 were not", "--host=1", "<- not refused by admission", "<- not the documented message: yes")
}

func TestHaveFailedWithinShowsTheTimeAndTheFailure(t *testing.T) {
	in := Interception{Step: "the split measurement", Failures: []string{"scraping engine md-server-1: context deadline exceeded"}, Took: 1200 * time.Millisecond}
	mustPass(t, failure(in, HaveFailedWithin(1500*time.Millisecond, "1s + 500ms", "md-server-1"), false))
	mustContain(t, failure(in, HaveFailedWithin(time.Second, "wait-metrics 500ms + 500ms", "md-server-1"), false),
		"but it took 1.2s", "took 1.2s, limit 1s (wait-metrics 500ms + 500ms)", "context deadline exceeded")
	mustContain(t, failure(Interception{Step: "x"}, HaveFailedWithin(time.Second, "", "y"), false), "but it did not fail")
}

func TestHaveLogLinesShowsWhatIsMissing(t *testing.T) {
	log := "\x1b[2mstarting\x1b[0m\nerror: invalid value 'abc'\r\nFor more information, try '--help'.\n"
	mustPass(t, failure(log, HaveLogLines("error: invalid value 'abc'", "For more information, try '--help'."), false))
	mustContain(t, failure(log, HaveLogLines("Error: InvalidValue"), false), "these are missing:\n  Error: InvalidValue", "end of the log")
}

func TestHaveLazyCounterRisenByReadsAnAbsentSeriesAsZero(t *testing.T) {
	before, after := roundRobin(t, 60, 60)
	mustPass(t, failure(after, HaveLazyCounterRisenBy(before, "vllm_router_load_balancing_events_total", 0), false))
	mustContain(t, failure(after, HaveLazyCounterRisenBy(before, "vllm_router_load_balancing_events_total", 3), false),
		"to have risen by 3, but it rose by 0", "0 → 0 (an absent series reads 0")
	mustPass(t, failure(after, HaveLazyCounterRisenBy(before, "vllm_router_processed_requests_total", 120), false))
}

func TestHaveSumAndHaveSumAtMostShowTheSeries(t *testing.T) {
	_, after := roundRobin(t, 60, 60)
	mustPass(t, failure(after, HaveSum("vllm_router_processed_requests_total", 122), false))
	mustContain(t, failure(after, HaveSum("vllm_router_processed_requests_total", 16), false),
		"to read 16, but it reads 122", `vllm_router_processed_requests_total{worker="http://127.3.0.7:8000"}`)
	mustPass(t, failure(after, HaveSumAtMost("vllm_router_processed_requests_total", 122, metrics.Eq("worker", w0)), false))
	mustContain(t, failure(after, HaveSumAtMost("vllm_router_processed_requests_total", 10, metrics.Eq("worker", w0)), false),
		"to sum to at most 10, but it reads 61")
	mustPass(t, failure(after, HaveSumAtMost("vllm_router_absent_total", 0), false))
	mustContain(t, failure(after, HaveSum("vllm_router_absent_total", 0), false), "no series vllm_router_absent_total")
}

func TestUseReplica(t *testing.T) {
	mustPass(t, failure(affine, UseReplica("md-engine-1"), false))
	mustPass(t, failure(affine, UseReplica("md-engine-0"), true))
	mustContain(t, failure(affine, UseReplica("md-engine-0"), false), "to use md-engine-0, but md-engine-0 served nothing", "0/354")
	mustContain(t, failure(affine, UseReplica("md-engine-1"), true), "not to use md-engine-1")
}

func TestHaveSchedulingWeightsTablesEveryWeight(t *testing.T) {
	cfg := SchedulingConfig{
		Rendered:  map[string]map[string]float64{"server": {"prefix-cache-scorer": 3, "queue-scorer": 2}},
		Effective: "{SchedulingProfiles: [{Name: server, Plugins: [{PluginRef: prefix-cache-scorer, Weight: 3.00} {PluginRef: queue-scorer, Weight: 1.00}]}]}",
	}
	mustPass(t, failure(cfg, HaveSchedulingWeights(Weight{"server", "prefix-cache-scorer", 3}), false))
	mustContain(t, failure(cfg, HaveSchedulingWeights(Weight{"server", "prefix-cache-scorer", 3}, Weight{"server", "queue-scorer", 2}), false),
		"but 1 of 2 differ", "queue-scorer", "missing", "<- differs", "effective configuration:")
	mustContain(t, failure(errors.New("x"), HaveSchedulingWeights(), false), "expects an assertions.SchedulingConfig")
}

func TestCheckInFlight(t *testing.T) {
	if err := CheckInFlight("g", map[string]int{"a": 1, "b": 0}, map[string]int{"a": 1}); err != nil {
		t.Errorf("a replica at 0 missing from want: %v", err)
	}
	if err := CheckInFlight("g", map[string]int{"a": 1}, map[string]int{"a": 1, "b": 0}); err != nil {
		t.Errorf("a replica at 0 missing from got: %v", err)
	}
	err := CheckInFlight("vllm_router_worker_load", map[string]int{"a": 2, "b": 0}, map[string]int{"a": 1, "b": 1})
	if err == nil || err.Error() != "the router's vllm_router_worker_load reads map[a:2 b:0], want map[a:1 b:1]" {
		t.Errorf("err = %v", err)
	}
	if err := CheckInFlight("g", map[string]int{"c": 1}, nil); err == nil {
		t.Error("a held request on a replica not wanted passed")
	}
}
