package vllmrouter

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
)

// metrics are vllm-router's series (src/metrics.rs; docs/routers.md#vllm-router-series), with
// their HELP texts, in one registry per process.
type metrics struct {
	reg *prometheus.Registry

	requests         *prometheus.CounterVec
	requestErrors    *prometheus.CounterVec
	retries          *prometheus.CounterVec
	retryBackoff     *prometheus.HistogramVec
	retriesExhausted *prometheus.CounterVec
	generateDuration *routerbase.Histogram
	processed        *prometheus.CounterVec
	decisions        *prometheus.CounterVec
	running          *prometheus.GaugeVec
	activeWorkers    *routerbase.Gauge
	workerHealth     *prometheus.GaugeVec
	lbEvents         *routerbase.Counter
	maxLoad          *routerbase.Gauge
	minLoad          *routerbase.Gauge
	pdRequests       *prometheus.CounterVec
	pdDuration       *prometheus.HistogramVec
	pdPrefill        *prometheus.CounterVec
	pdDecode         *prometheus.CounterVec
	pdErrors         *prometheus.CounterVec
	pdPrefillErrors  *prometheus.CounterVec
	pdDecodeErrors   *prometheus.CounterVec
	cb               routerbase.CircuitSeries
}

func newMetrics() *metrics {
	r := prometheus.NewRegistry()
	return &metrics{
		reg:              r,
		requests:         routerbase.CounterVec(r, "vllm_router_requests_total", "Total number of requests by route and method", "route"),
		requestErrors:    routerbase.CounterVec(r, "vllm_router_request_errors_total", "Total number of request errors by route and error type", "route", "error_type"),
		retries:          routerbase.CounterVec(r, "vllm_router_retries_total", "Total number of request retries by route", "route"),
		retryBackoff:     routerbase.HistogramVec(r, "vllm_router_retry_backoff_duration_seconds", "Backoff duration in seconds by attempt index", "attempt"),
		retriesExhausted: routerbase.CounterVec(r, "vllm_router_retries_exhausted_total", "Total number of requests that exhausted retries by route", "route"),
		generateDuration: routerbase.NewHistogram(r, "vllm_router_generate_duration_seconds", "Generate request duration"),
		processed:        routerbase.CounterVec(r, "vllm_router_processed_requests_total", "Total requests processed by each worker", "worker"),
		decisions:        routerbase.CounterVec(r, "vllm_router_policy_decisions_total", "Total routing policy decisions by policy and worker", "policy", "worker"),
		running:          routerbase.GaugeVec(r, "vllm_router_running_requests", "Number of running requests per worker", "worker"),
		activeWorkers:    routerbase.NewGauge(r, "vllm_router_active_workers", "Number of currently active workers"),
		workerHealth:     routerbase.GaugeVec(r, "vllm_router_worker_health", "Worker health status (1=healthy, 0=unhealthy)", "worker"),
		lbEvents:         routerbase.NewCounter(r, "vllm_router_load_balancing_events_total", "Total load balancing trigger events"),
		maxLoad:          routerbase.NewGauge(r, "vllm_router_max_load", "Maximum worker load"),
		minLoad:          routerbase.NewGauge(r, "vllm_router_min_load", "Minimum worker load"),
		pdRequests:       routerbase.CounterVec(r, "vllm_router_pd_requests_total", "Total PD requests by route", "route"),
		pdDuration:       routerbase.HistogramVec(r, "vllm_router_pd_request_duration_seconds", "PD request duration by route", "route"),
		pdPrefill:        routerbase.CounterVec(r, "vllm_router_pd_prefill_requests_total", "Total prefill requests per worker", "worker"),
		pdDecode:         routerbase.CounterVec(r, "vllm_router_pd_decode_requests_total", "Total decode requests per worker", "worker"),
		pdErrors:         routerbase.CounterVec(r, "vllm_router_pd_errors_total", "Total PD errors by error type", "error_type"),
		pdPrefillErrors:  routerbase.CounterVec(r, "vllm_router_pd_prefill_errors_total", "Total prefill server errors", "worker"),
		pdDecodeErrors:   routerbase.CounterVec(r, "vllm_router_pd_decode_errors_total", "Total decode server errors", "worker"),
		cb: routerbase.CircuitSeries{
			State:       routerbase.GaugeVec(r, "vllm_router_cb_state", "Circuit breaker state per worker (0=closed, 1=open, 2=half_open)", "worker"),
			Transitions: routerbase.CounterVec(r, "vllm_router_cb_state_transitions_total", "Total number of circuit breaker state transitions by worker", "worker", "from", "to"),
			Outcomes:    routerbase.CounterVec(r, "vllm_router_cb_outcomes_total", "Total number of circuit breaker outcomes by worker and outcome type (success/failure)", "worker", "outcome"),
			// record_outcome sets cb_state after every outcome; nothing
			// sets it when a worker is added.
			StateEveryOutcome: true,
		},
	}
}

// pick records one policy pick (processed_requests and policy_decisions are
// recorded inside the VR policies, on every pick, retries included).
func (m *metrics) pick(policyName, worker string) {
	m.processed.WithLabelValues(worker).Inc()
	m.decisions.WithLabelValues(policyName, worker).Inc()
}

func (m *metrics) backoff(d time.Duration, attempt uint32) {
	m.retryBackoff.WithLabelValues(strconv.FormatUint(uint64(attempt), 10)).Observe(d.Seconds())
}
