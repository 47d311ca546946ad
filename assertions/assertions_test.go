package assertions_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	. "github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/internal/exposition"
	"github.com/gpustack/routing-conformance/metrics"
)

const model = "Qwen/Qwen3-0.6B"

// failure runs Expect(actual).To(m) (or NotTo) through a real Gomega and
// returns the message it failed with, "" if it passed.
func failure(actual any, m types.GomegaMatcher, negate bool) string {
	var msg string
	g := NewGomega(func(message string, _ ...int) { msg = message })
	if negate {
		g.Expect(actual).NotTo(m)
	} else {
		g.Expect(actual).To(m)
	}
	return msg
}

func mustContain(t *testing.T, msg string, wants ...string) {
	t.Helper()
	if msg == "" {
		t.Fatalf("the matcher passed; want a failure containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("failure message lacks %q:\n%s", w, msg)
		}
	}
}

func mustPass(t *testing.T, msg string) {
	t.Helper()
	if msg != "" {
		t.Errorf("the matcher failed:\n%s", msg)
	}
}

func scrape(t *testing.T, srv *exposition.Server) metrics.Snapshot {
	t.Helper()
	s, err := metrics.Scrape(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	w0 = "http://127.3.0.7:8000"
	w1 = "http://127.3.0.8:8000"
)

// roundRobin gives the vllm-router snapshots around 120 round-robin
// requests of which the picks are a/b per worker.
func roundRobin(t *testing.T, a, b int) (before, after metrics.Snapshot) {
	pod := exposition.Serve(t, exposition.VLLMRouter("round_robin", map[string]int{w0: 1, w1: 1}, 2))
	before = scrape(t, pod)
	pod.Set(exposition.VLLMRouter("round_robin", map[string]int{w0: 1 + a, w1: 1 + b}, 2))
	return before, scrape(t, pod)
}

func TestHaveCounterRisenBy(t *testing.T) {
	before, after := roundRobin(t, 60, 60)
	rr := metrics.Eq("policy", "round_robin")
	mustPass(t, failure(after, HaveCounterRisenBy(before, "vllm_router_policy_decisions_total", 120, rr), false))
	mustPass(t, failure(&after, HaveCounterRisenBy(before, "vllm_router_policy_decisions_total", 60, rr, metrics.Eq("worker", w0)), false))

	msg := failure(after, HaveCounterRisenBy(before, "vllm_router_policy_decisions_total", 100, rr), false)
	mustContain(t, msg, `to have risen by 100`, `it rose by 120`,
		`vllm_router_policy_decisions_total{policy="round_robin",worker="http://127.3.0.7:8000"}: 1 → 61 (+60)`)

	msg = failure(after, HaveCounterRisenBy(before, "vllm_router_policy_decisions_total", 120, rr), true)
	mustContain(t, msg, "not to have risen by 120", "1 → 61")
}

func TestHaveCounterRisenByRefusesToJudgeWithoutEvidence(t *testing.T) {
	before, after := roundRobin(t, 60, 60)
	// A typo: an error naming the nearest series, for To and NotTo alike.
	for _, negate := range []bool{false, true} {
		msg := failure(after, HaveCounterRisenBy(before, "vllm_router_policy_decision_total", 0), negate)
		mustContain(t, msg, "no series vllm_router_policy_decision_total", "vllm_router_policy_decisions_total")
	}
	// A restarted router: the reset is the message, never a negative rise.
	msg := failure(before, HaveCounterRisenBy(after, "vllm_router_processed_requests_total", 0), false)
	mustContain(t, msg, "counter reset", "61 → 1")

	mustContain(t, failure("text", HaveCounterRisenBy(before, "x", 1), false), "expects a metrics.Snapshot, got string")
}

func TestHaveCounterRisenByPerWorker(t *testing.T) {
	before, after := roundRobin(t, 60, 60)
	rr := metrics.Eq("policy", "round_robin")
	mustPass(t, failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", []string{w1, w0}, 60, rr), false))
	// Only the named workers are judged: one of them alone still rose by 60.
	mustPass(t, failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", []string{w0}, 60, rr), false))

	before, after = roundRobin(t, 61, 59)
	msg := failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", []string{w0, w1}, 60, rr), false)
	mustContain(t, msg, `to have risen by 60 for each worker`, "worker=http://127.3.0.7:8000 rose by 61; worker=http://127.3.0.8:8000 rose by 59",
		"worker=http://127.3.0.7:8000: 61", "evidence:", "1 → 62 (+61)")
	// A worker without a series rose by nothing.
	msg = failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", []string{w0, "http://127.3.0.9:8000"}, 61, rr), false)
	mustContain(t, msg, "worker=http://127.3.0.9:8000 rose by 0")
	mustContain(t, failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", []string{w0, w1}, 60, rr), false), "to have risen by 60")
	before, after = roundRobin(t, 60, 60)
	mustContain(t, failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", []string{w0, w1}, 60, rr), true), "not to have risen by 60")

	for _, negate := range []bool{false, true} {
		mustContain(t, failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decision_total", "worker", []string{w0}, 60), negate), "no series vllm_router_policy_decision_total")
		mustContain(t, failure(after, HaveCounterRisenByPer(before, "vllm_router_policy_decisions_total", "worker", nil, 60), negate), "no worker values to judge")
	}
}

func TestHaveSeries(t *testing.T) {
	ca := scrape(t, exposition.Serve(t, exposition.SMG("cache_aware", model, 3, []string{w0, w1})))
	rr := scrape(t, exposition.Serve(t, exposition.SMG("round_robin", model, 3, []string{w0, w1})))
	mustPass(t, failure(ca, HaveSeries("smg_worker_requests_active", metrics.Eq("worker", w0)), false))
	// smg_worker_requests_active exists only under cache_aware.
	mustPass(t, failure(rr, HaveSeries("smg_worker_requests_active"), true))

	msg := failure(rr, HaveSeries("smg_worker_requests_active"), false)
	mustContain(t, msg, "Expected a series smg_worker_requests_active", "nearest names present", "smg_worker_health")
	msg = failure(ca, HaveSeries("smg_worker_requests_active", metrics.Eq("worker", "http://10.0.0.1:8000")), false)
	mustContain(t, msg, "series of that name present", `smg_worker_requests_active{worker="http://127.3.0.7:8000"} 0`)
	msg = failure(ca, HaveSeries("smg_worker_requests_active"), true)
	mustContain(t, msg, "Expected no series smg_worker_requests_active, but found", w1)
}

func TestHaveLabelValues(t *testing.T) {
	s := scrape(t, exposition.Serve(t, exposition.VLLMRouter("cache_aware", map[string]int{w0: 3, w1: 4}, 2)))
	mustPass(t, failure(s, HaveLabelValues("vllm_router_processed_requests_total", "worker", []string{w1, w0}), false))

	msg := failure(s, HaveLabelValues("vllm_router_running_requests", "worker", []string{w0}), false)
	mustContain(t, msg, `a series has worker="http://127.3.0.8:8000", which is not one of them`, `vllm_router_running_requests{worker="http://127.3.0.8:8000"} 0`,
		`values found: ["http://127.3.0.7:8000" "http://127.3.0.8:8000"]`)
	msg = failure(s, HaveLabelValues("vllm_router_running_requests", "worker", []string{w0, w1, "http://127.3.0.9:8000"}), false)
	mustContain(t, msg, `no series has worker="http://127.3.0.9:8000"`)
	msg = failure(s, HaveLabelValues("vllm_router_running_requests", "policy", []string{"cache_aware"}), false)
	mustContain(t, msg, "a series has no policy", `no series has policy="cache_aware"`)
	for _, negate := range []bool{false, true} {
		msg = failure(s, HaveLabelValues("vllm_router_procesed_requests_total", "worker", []string{w0}), negate)
		mustContain(t, msg, "no series vllm_router_procesed_requests_total", "nearest names present: vllm_router_processed_requests_total")
	}
	mustContain(t, failure(s, HaveLabelValues("vllm_router_processed_requests_total", "worker", []string{w0, w1}), true), "not to carry worker with exactly")
}
