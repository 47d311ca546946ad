package sglanggateway

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
)

// metrics are sgl-model-gateway's series (src/observability/metrics.rs;
// docs/routers.md#sgl-model-gateway-series) with their HELP texts. The two
// policy branch counters are not described in the source, so they have no
// HELP line.
type metrics struct {
	reg *prometheus.Registry

	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	httpResponses    *prometheus.CounterVec
	httpConnections  *routerbase.Gauge
	inflightAge      *prometheus.GaugeVec
	routerRequests   *prometheus.CounterVec
	routerDuration   *prometheus.HistogramVec
	routerErrors     *prometheus.CounterVec
	upstreamResp     *prometheus.CounterVec
	poolSize         *prometheus.GaugeVec
	requestsActive   *prometheus.GaugeVec
	workerHealth     *prometheus.GaugeVec
	healthChecks     *prometheus.CounterVec
	selection        *prometheus.CounterVec
	workerErrors     *prometheus.CounterVec
	manualEntries    *routerbase.Gauge
	cbFailures       *prometheus.GaugeVec
	cbSuccesses      *prometheus.GaugeVec
	retries          *prometheus.CounterVec
	retriesExhausted *prometheus.CounterVec
	retryBackoff     *prometheus.SummaryVec
	discRegs         *prometheus.CounterVec
	discDeregs       *prometheus.CounterVec
	discWorkers      *prometheus.GaugeVec
	manualBranch     *prometheus.CounterVec
	prefixBranch     *prometheus.CounterVec
	cb               routerbase.CircuitSeries
}

func newMetrics() *metrics {
	r := prometheus.NewRegistry()
	m := &metrics{
		reg:              r,
		httpRequests:     routerbase.CounterVec(r, "smg_http_requests_total", "Total HTTP requests by method and path", "method", "path"),
		httpDuration:     routerbase.HistogramVec(r, "smg_http_request_duration_seconds", "HTTP request duration by method and path", "method", "path"),
		httpResponses:    routerbase.CounterVec(r, "smg_http_responses_total", "Total HTTP responses by status_code and error_code", "status_code", "error_code"),
		httpConnections:  routerbase.NewGauge(r, "smg_http_connections_active", "Currently active HTTP connections"),
		inflightAge:      routerbase.GaugeVec(r, "smg_http_inflight_request_age_count", "In-flight HTTP requests per age bucket (gt < age <= le, non-cumulative)", "gt", "le"),
		routerRequests:   routerbase.CounterVec(r, "smg_router_requests_total", "Total routed requests by router_type, backend_type, connection_mode, model, endpoint, streaming", "router_type", "backend_type", "connection_mode", "model", "endpoint", "streaming"),
		routerDuration:   routerbase.HistogramVec(r, "smg_router_request_duration_seconds", "Router request duration by router_type, backend_type, connection_mode, model, endpoint", "router_type", "backend_type", "connection_mode", "model", "endpoint"),
		routerErrors:     routerbase.CounterVec(r, "smg_router_request_errors_total", "Router errors by router_type, backend_type, connection_mode, model, endpoint, error_type", "router_type", "backend_type", "connection_mode", "model", "endpoint", "error_type"),
		upstreamResp:     routerbase.CounterVec(r, "smg_router_upstream_responses_total", "Upstream backend HTTP responses by router_type, status_code, error_code", "router_type", "status_code", "error_code"),
		poolSize:         routerbase.GaugeVec(r, "smg_worker_pool_size", "Current worker pool size by worker_type, connection_mode, model", "worker_type", "connection_mode", "model"),
		requestsActive:   routerbase.GaugeVec(r, "smg_worker_requests_active", "Currently running requests per worker", "worker"),
		workerHealth:     routerbase.GaugeVec(r, "smg_worker_health", "Worker health status (1=healthy, 0=unhealthy)", "worker"),
		healthChecks:     routerbase.CounterVec(r, "smg_worker_health_checks_total", "Health check results by worker_type and result", "worker_type", "result"),
		selection:        routerbase.CounterVec(r, "smg_worker_selection_total", "Worker selection events by worker_type, connection_mode, model, policy", "worker_type", "connection_mode", "model", "policy"),
		workerErrors:     routerbase.CounterVec(r, "smg_worker_errors_total", "Worker-level errors by worker_type, connection_mode, error_type", "worker_type", "connection_mode", "error_type"),
		manualEntries:    routerbase.NewGauge(r, "smg_manual_policy_cache_entries", "Number of routing entries in manual policy cache"),
		cbFailures:       routerbase.GaugeVec(r, "smg_worker_cb_consecutive_failures", "Current consecutive failure count per worker", "worker"),
		cbSuccesses:      routerbase.GaugeVec(r, "smg_worker_cb_consecutive_successes", "Current consecutive success count per worker", "worker"),
		retries:          routerbase.CounterVec(r, "smg_worker_retries_total", "Total retry attempts by worker_type and endpoint", "worker_type", "endpoint"),
		retriesExhausted: routerbase.CounterVec(r, "smg_worker_retries_exhausted_total", "Requests that exhausted all retries by worker_type and endpoint", "worker_type", "endpoint"),
		retryBackoff:     routerbase.SummaryVec(r, "smg_worker_retry_backoff_seconds", "Retry backoff duration by attempt number", "attempt"),
		discRegs:         routerbase.CounterVec(r, "smg_discovery_registrations_total", "Worker registration attempts by source and result", "source", "result"),
		discDeregs:       routerbase.CounterVec(r, "smg_discovery_deregistrations_total", "Worker deregistration events by source and reason", "source", "reason"),
		discWorkers:      routerbase.GaugeVec(r, "smg_discovery_workers_discovered", "Workers known via discovery by source", "source"),
		manualBranch:     routerbase.CounterVec(r, "smg_manual_policy_branch_total", "", "branch"),
		prefixBranch:     routerbase.CounterVec(r, "smg_prefix_hash_policy_branch_total", "", "branch"),
		cb: routerbase.CircuitSeries{
			State:       routerbase.GaugeVec(r, "smg_worker_cb_state", "Circuit breaker state per worker (0=closed, 1=open, 2=half_open)", "worker"),
			Transitions: routerbase.CounterVec(r, "smg_worker_cb_transitions_total", "Circuit breaker state transitions by worker, from, to", "worker", "from", "to"),
			Outcomes:    routerbase.CounterVec(r, "smg_worker_cb_outcomes_total", "Circuit breaker outcomes by worker and outcome (success/failure)", "worker", "outcome"),
		},
	}
	m.cb.ConsecutiveFailures, m.cb.ConsecutiveSuccesses = m.cbFailures, m.cbSuccesses
	return m
}

func (m *metrics) backoff(d time.Duration, attempt uint32) {
	m.retryBackoff.WithLabelValues(strconv.FormatUint(uint64(attempt), 10)).Observe(d.Seconds())
}

// routeToEndpoint is route_to_endpoint.
func routeToEndpoint(route string) string {
	switch route {
	case "/v1/chat/completions":
		return "chat"
	case "/generate":
		return "generate"
	case "/v1/completions":
		return "completions"
	case "/v1/rerank":
		return "rerank"
	case "/v1/responses":
		return "responses"
	}
	return "other"
}

// errorTypeFromStatus is error_type_from_status.
func errorTypeFromStatus(status int) string {
	switch {
	case status == 400:
		return "validation_error"
	case status == 404:
		return "no_workers"
	case status == 408 || status == 504:
		return "timeout"
	case status >= 500 && status <= 599:
		return "backend_error"
	}
	return "internal_error"
}

// normalizePath is normalize_path_for_metrics: dynamic id segments past
// the second become "{id}" (sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/middleware.rs).
func normalizePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		// Only from the third segment on ("/v1/responses/{id}"): the
		// leading empty one counts, so /get_model_info stays as it is.
		if i > 2 && s != "" && isDynamicID(s) {
			segs[i] = "{id}"
		}
	}
	return strings.Join(segs, "/")
}

func isDynamicID(s string) bool {
	if len(s) > 10 && strings.Contains(s, "_") {
		return true
	}
	if len(s) >= 32 {
		hex := true
		for _, c := range s {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
				hex = false
				break
			}
		}
		if hex {
			return true
		}
	}
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
