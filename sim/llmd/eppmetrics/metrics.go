// Package eppmetrics is the EPP's Prometheus surface on :9090: the
// llm_d_epp_* families and their legacy twins with the names, HELP texts,
// label sets and buckets of llm-d/llm-d-router@71f4f099 (v0.10.0):
// pkg/epp/metrics/metrics.go (legacy), pkg/epp/metrics/llm_d_router_metrics.go
// (current), pkg/epp/metrics/collectors/inference_pool.go (per-endpoint
// queue), scheduling/profilehandler/disagg/metrics.go (P/D decisions) and
// requestcontrol/dataproducer/approximateprefix/metrics.go (prefix indexer).
//
// One Registry per EPP process: the real EPP registers package globals in
// controller-runtime's registry, but the sim runs several EPPs in one
// process. As in the real EPP, a labelled family shows no series until its
// first observation.
package eppmetrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	subsystem       = "llm_d_epp"
	legacyObjective = "inference_objective"
	legacyPool      = "inference_pool"
	legacyExtension = "inference_extension"
	legacyScheduler = "llm_d_inference_scheduler"
)

// DefaultFairnessID is the fairness_id of requests without the header
// (pkg/epp/metadata/consts.go).
const DefaultFairnessID = "default-flow"

// Scheduler attempt statuses.
const (
	StatusSuccess = "success"
	StatusFailure = "failure"
)

// alpha is HelpMsgWithStability(msg, ALPHA).
func alpha(msg string) string { return "[ALPHA] " + msg }

func deprecated(current, msg string) string { return alpha("[Deprecated: Use " + current + "] " + msg) }

var (
	modelLabels       = []string{"model_name", "target_model_name"}
	modelFairPrio     = []string{"model_name", "target_model_name", "fairness_id", "priority"}
	modelFairPrioStrm = []string{"model_name", "target_model_name", "fairness_id", "priority", "streaming"}
	poolLabels        = []string{"name"}

	generalLatencyBuckets = []float64{
		0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6,
		8, 10, 15, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200,
		1800, 2700, 3600,
	}
	requestSizeBuckets = []float64{
		64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
		131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608,
		16777216, 33554432, 67108864, 134217728, 268435456, 536870912, 1073741824,
	}
	responseSizeBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536}
	inputTokenBuckets   = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536, 131072, 262144, 524288, 1048576}
	outputTokenBuckets  = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}
	ntpotBuckets        = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0}
	ttftBuckets         = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60, 120}
	tpotBuckets         = []float64{0.0005, 0.00205, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 2}
	itlBuckets          = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2}
	schedBuckets        = []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1}
	reqProcBuckets      = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.025, 0.04, 0.06, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	respProcBuckets     = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	hitRatioBuckets     = []float64{0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}
	hitBytesBuckets     = []float64{0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}
)

func counter(sub, name, help string, labels []string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: name, Help: help}, labels)
}

func gauge(sub, name, help string, labels []string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: name, Help: help}, labels)
}

func histogram(sub, name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: name, Help: help, Buckets: buckets}, labels)
}

// Registry holds one EPP's collectors.
type Registry struct {
	Gatherer *prometheus.Registry

	requestTotal, requestTotalLegacy     *prometheus.CounterVec
	requestErrors, requestErrorsLegacy   *prometheus.CounterVec
	requestLatency, requestLatencyLegacy *prometheus.HistogramVec
	requestSize, requestSizeLegacy       *prometheus.HistogramVec
	responseSize, responseSizeLegacy     *prometheus.HistogramVec
	inputTokens, inputTokensLegacy       *prometheus.HistogramVec
	outputTokens, outputTokensLegacy     *prometheus.HistogramVec
	running, runningLegacy               *prometheus.GaugeVec
	ntpot, ntpotLegacy                   *prometheus.HistogramVec
	ttft, tpot, itl                      *prometheus.HistogramVec

	avgKV, avgKVLegacy           *prometheus.GaugeVec
	avgQueue, avgQueueLegacy     *prometheus.GaugeVec
	avgRunning, avgRunningLegacy *prometheus.GaugeVec
	stdKV, stdQueue, stdRunning  *prometheus.GaugeVec
	ready, readyLegacy           *prometheus.GaugeVec

	schedE2E, schedE2ELegacy           *prometheus.HistogramVec
	schedAttempts, schedAttemptsLegacy *prometheus.CounterVec
	plugin, pluginLegacy               *prometheus.HistogramVec
	reqProc, respProc                  *prometheus.HistogramVec
	info, infoLegacy                   *prometheus.GaugeVec
	pollErrors, pollErrorsLegacy       *prometheus.CounterVec
	extractErrors, extractErrorsLegacy *prometheus.CounterVec

	disagg, disaggLegacy *prometheus.CounterVec
	pd, pdLegacy         *prometheus.CounterVec

	prefixSize, prefixSizeLegacy   *prometheus.GaugeVec
	prefixRatio, prefixRatioLegacy *prometheus.HistogramVec
	prefixBytes, prefixBytesLegacy *prometheus.HistogramVec

	pluginObs sync.Map
}

// New builds the registry with every family metrics.Register registers.
func New() *Registry {
	r := &Registry{Gatherer: prometheus.NewRegistry()}
	r.requestTotalLegacy = counter(legacyObjective, "request_total", deprecated("llm_d_epp_request_total", "Counter of inference objective requests broken out for each model and target model."), []string{"model_name", "target_model_name", "priority"})
	r.requestTotal = counter(subsystem, "request_total", alpha("Total number of processed requests."), modelFairPrio)
	r.requestErrorsLegacy = counter(legacyObjective, "request_error_total", deprecated("llm_d_epp_request_error_total", "Counter of inference objective requests errors broken out for each model and target model."), append(append([]string{}, modelLabels...), "error_code"))
	r.requestErrors = counter(subsystem, "request_error_total", alpha("Total number of request errors."), append(append([]string{}, modelFairPrio...), "error_code"))
	r.requestLatencyLegacy = histogram(legacyObjective, "request_duration_seconds", deprecated("llm_d_epp_request_duration_seconds", "Inference objective response latency distribution in seconds for each model and target model."), generalLatencyBuckets, modelLabels)
	r.requestLatency = histogram(subsystem, "request_duration_seconds", alpha("End-to-end request latency distribution in seconds."), generalLatencyBuckets, modelFairPrio)
	r.requestSizeLegacy = histogram(legacyObjective, "request_sizes", deprecated("llm_d_epp_request_size_bytes", "Inference objective requests size distribution in bytes for each model and target model."), requestSizeBuckets, modelLabels)
	r.requestSize = histogram(subsystem, "request_size_bytes", alpha("Incoming request body size distribution in bytes."), requestSizeBuckets, modelFairPrio)
	r.responseSizeLegacy = histogram(legacyObjective, "response_sizes", deprecated("llm_d_epp_response_size_bytes", "Inference objective responses size distribution in bytes for each model and target model."), responseSizeBuckets, modelLabels)
	r.responseSize = histogram(subsystem, "response_size_bytes", alpha("Outgoing response body size distribution in bytes."), responseSizeBuckets, modelFairPrio)
	r.inputTokensLegacy = histogram(legacyObjective, "input_tokens", deprecated("llm_d_epp_request_input_tokens", "Inference objective input token count distribution for requests in each model."), inputTokenBuckets, modelLabels)
	r.inputTokens = histogram(subsystem, "request_input_tokens", alpha("Input token count distribution per request."), inputTokenBuckets, modelFairPrio)
	r.outputTokensLegacy = histogram(legacyObjective, "output_tokens", deprecated("llm_d_epp_request_output_tokens", "Inference objective output token count distribution for requests in each model."), outputTokenBuckets, modelLabels)
	r.outputTokens = histogram(subsystem, "request_output_tokens", alpha("Output token count distribution per request."), outputTokenBuckets, modelFairPrio)
	r.runningLegacy = gauge(legacyObjective, "running_requests", deprecated("llm_d_epp_request_running", "Inference objective number of running requests in each model."), []string{"model_name"})
	r.running = gauge(subsystem, "request_running", alpha("Current number of active running requests."), modelFairPrio)
	r.ntpotLegacy = histogram(legacyObjective, "normalized_time_per_output_token_seconds", deprecated("llm_d_epp_request_ntpot_seconds", "Inference objective latency divided by number of output tokens in seconds for each model and target model."), ntpotBuckets, modelLabels)
	r.ntpot = histogram(subsystem, "request_ntpot_seconds", alpha("Normalized time per output token in seconds (end-to-end latency divided by output token count)."), ntpotBuckets, modelFairPrio)
	r.ttft = histogram(subsystem, "request_ttft_seconds", alpha("Time to first token in seconds, measured from request received to first response byte. For non-streaming requests, this equals total request duration."), ttftBuckets, modelFairPrioStrm)
	r.tpot = histogram(subsystem, "request_streaming_tpot_seconds", alpha("Average time per output token in seconds for streaming requests, computed as (e2e - TTFT) / (output_tokens - 1)."), tpotBuckets, modelFairPrio)
	r.itl = histogram(subsystem, "request_streaming_itl_seconds", alpha("Inter-token latency in seconds for streaming requests, measured as the time between consecutive response body chunks."), itlBuckets, modelFairPrio)

	r.avgKVLegacy = gauge(legacyPool, "average_kv_cache_utilization", deprecated("llm_d_epp_average_kv_cache_utilization", "The average kv cache utilization for an inference server pool."), poolLabels)
	r.avgKV = gauge(subsystem, "average_kv_cache_utilization", alpha("The average kv cache utilization for an inference server pool."), poolLabels)
	r.stdKV = gauge(subsystem, "std_dev_kv_cache_utilization", alpha("The standard deviation kv cache utilization for an inference server pool."), poolLabels)
	r.avgQueueLegacy = gauge(legacyPool, "average_queue_size", deprecated("llm_d_epp_average_queue_size", "The average number of requests pending in the model server queue."), poolLabels)
	r.avgQueue = gauge(subsystem, "average_queue_size", alpha("The average number of requests pending in the model server queue."), poolLabels)
	r.stdQueue = gauge(subsystem, "std_dev_queue_size", alpha("The standard deviation number of requests pending in the model server queue."), poolLabels)
	r.avgRunningLegacy = gauge(legacyPool, "average_running_requests", deprecated("llm_d_epp_average_running_requests", "The average number of running requests across model servers in the pool."), poolLabels)
	r.avgRunning = gauge(subsystem, "average_running_requests", alpha("The average number of running requests across model servers in the pool."), poolLabels)
	r.stdRunning = gauge(subsystem, "std_dev_running_requests", alpha("The standard deviation number of running requests across model servers in the pool."), poolLabels)
	r.readyLegacy = gauge(legacyPool, "ready_pods", deprecated("llm_d_epp_ready_endpoints", "The number of ready pods in the inference server pool."), poolLabels)
	r.ready = gauge(subsystem, "ready_endpoints", alpha("The number of ready endpoints in the inference server pool."), poolLabels)

	r.schedE2ELegacy = histogram(legacyExtension, "scheduler_e2e_duration_seconds", deprecated("llm_d_epp_scheduler_e2e_duration_seconds", "End-to-end scheduling latency distribution in seconds."), schedBuckets, []string{})
	r.schedE2E = histogram(subsystem, "scheduler_e2e_duration_seconds", alpha("End-to-end scheduling latency distribution in seconds."), schedBuckets, []string{})
	r.schedAttemptsLegacy = counter(legacyExtension, "scheduler_attempts_total", deprecated("llm_d_epp_scheduler_attempts_total", "Total number of scheduling attempts."), []string{"status", "target_model_name", "pod_name", "namespace", "port"})
	r.schedAttempts = counter(subsystem, "scheduler_attempts_total", alpha("Total number of scheduling attempts."), []string{"status", "target_model_name", "endpoint_name", "namespace", "port"})
	pluginLabels := []string{"extension_point", "plugin_type", "plugin_name"}
	r.pluginLegacy = histogram(legacyExtension, "plugin_duration_seconds", deprecated("llm_d_epp_plugin_duration_seconds", "Plugin processing latency distribution in seconds for each extension point, plugin type and plugin name."), schedBuckets, pluginLabels)
	r.plugin = histogram(subsystem, "plugin_duration_seconds", alpha("Plugin processing latency distribution in seconds for each extension point, plugin type and plugin name."), schedBuckets, pluginLabels)
	r.reqProc = histogram(subsystem, "request_processing_duration_seconds", alpha("EPP request processing latency distribution in seconds, from request receipt until the request body has been handled, including admission control."), reqProcBuckets, []string{})
	r.respProc = histogram(subsystem, "response_processing_duration_seconds", alpha("EPP response processing latency distribution in seconds: the sum of per-chunk handler time for a streamed response, or the interval from response headers to completion for a non-streaming response."), respProcBuckets, []string{})
	r.infoLegacy = gauge(legacyExtension, "info", alpha("General information of the current build of Inference Extension."), []string{"commit", "build_ref"})
	r.info = gauge(subsystem, "info", alpha("General information of the current build of Inference Extension."), []string{"commit", "build_ref"})
	r.pollErrorsLegacy = counter(legacyScheduler, "datalayer_poll_errors_total", deprecated("llm_d_epp_datalayer_poll_errors_total", "Data-source poll errors per source type."), []string{"source_type"})
	r.pollErrors = counter(subsystem, "datalayer_poll_errors_total", alpha("Data-source poll errors per source type."), []string{"source_type"})
	r.extractErrorsLegacy = counter(legacyScheduler, "datalayer_extract_errors_total", deprecated("llm_d_epp_datalayer_extract_errors_total", "Extract errors per source/extractor type."), []string{"source_type", "extractor_type"})
	r.extractErrors = counter(subsystem, "datalayer_extract_errors_total", alpha("Extract errors per source/extractor type."), []string{"source_type", "extractor_type"})

	r.Gatherer.MustRegister(
		r.requestTotalLegacy, r.requestTotal, r.requestErrorsLegacy, r.requestErrors,
		r.requestLatencyLegacy, r.requestLatency, r.requestSizeLegacy, r.requestSize,
		r.responseSizeLegacy, r.responseSize, r.inputTokensLegacy, r.inputTokens,
		r.outputTokensLegacy, r.outputTokens, r.runningLegacy, r.running,
		r.ntpotLegacy, r.ntpot, r.ttft, r.tpot, r.itl,
		r.avgKVLegacy, r.avgKV, r.stdKV, r.avgQueueLegacy, r.avgQueue, r.stdQueue,
		r.avgRunningLegacy, r.avgRunning, r.stdRunning, r.readyLegacy, r.ready,
		r.schedE2ELegacy, r.schedE2E, r.schedAttemptsLegacy, r.schedAttempts,
		r.pluginLegacy, r.plugin, r.reqProc, r.respProc, r.infoLegacy, r.info,
		r.pollErrorsLegacy, r.pollErrors, r.extractErrorsLegacy, r.extractErrors,
	)
	return r
}

// RegisterDisagg registers the P/D decision counters, as the disagg and
// pd profile handler factories do (only when one is configured).
func (r *Registry) RegisterDisagg() {
	if r.disagg != nil {
		return
	}
	dl := []string{"plugin_name", "plugin_type", "model_name", "decision_type"}
	ll := []string{"model_name", "decision_type"}
	r.pdLegacy = counter(legacyScheduler, "pd_decision_total", deprecated("llm_d_epp_pd_decision_total", "Total number of P/D disaggregation decisions made"), ll)
	r.pd = counter(subsystem, "pd_decision_total", alpha("Total number of P/D disaggregation decisions made"), dl)
	r.disaggLegacy = counter(legacyScheduler, "disagg_decision_total", deprecated("llm_d_epp_disagg_decision_total", "Total number of disaggregation routing decisions made"), ll)
	r.disagg = counter(subsystem, "disagg_decision_total", alpha("Total number of disaggregation routing decisions made"), dl)
	r.Gatherer.MustRegister(r.pdLegacy, r.pd, r.disaggLegacy, r.disagg)
}

// RegisterPrefixIndexer registers the approximate producer's metrics
// (approximateprefix registerMetrics).
func (r *Registry) RegisterPrefixIndexer() {
	if r.prefixSize != nil {
		return
	}
	pl := []string{"plugin_name", "plugin_type"}
	r.prefixSizeLegacy = gauge(legacyExtension, "prefix_indexer_size", deprecated("llm_d_epp_prefix_indexer_size", "Size of the prefix indexer."), []string{})
	r.prefixSize = gauge(subsystem, "prefix_indexer_size", alpha("Size of the prefix indexer."), pl)
	r.prefixRatioLegacy = histogram(legacyExtension, "prefix_indexer_hit_ratio", deprecated("llm_d_epp_prefix_indexer_hit_ratio", "Ratio of prefix length matched to total prefix length in the cache lookup."), hitRatioBuckets, []string{})
	r.prefixRatio = histogram(subsystem, "prefix_indexer_hit_ratio", alpha("Ratio of prefix length matched to total prefix length in the cache lookup."), hitRatioBuckets, pl)
	r.prefixBytesLegacy = histogram(legacyExtension, "prefix_indexer_hit_bytes", deprecated("llm_d_epp_prefix_indexer_hit_bytes", "Length of the prefix match in number of bytes in the cache lookup."), hitBytesBuckets, []string{})
	r.prefixBytes = histogram(subsystem, "prefix_indexer_hit_bytes", alpha("Length of the prefix match in number of bytes in the cache lookup."), hitBytesBuckets, pl)
	r.Gatherer.MustRegister(r.prefixSizeLegacy, r.prefixSize, r.prefixRatioLegacy, r.prefixRatio, r.prefixBytesLegacy, r.prefixBytes)
}

// Labels identifies a request in the model-labelled families.
type Labels struct {
	Model, Target, Fairness string
	Priority                int
}

func (l Labels) prio() string { return strconv.Itoa(l.Priority) }

func (l Labels) fair() string {
	if l.Fairness == "" {
		return DefaultFairnessID
	}
	return l.Fairness
}

// RequestTotal counts a scheduled request (RecordRequestCounter).
func (r *Registry) RequestTotal(l Labels) {
	r.requestTotalLegacy.WithLabelValues(l.Model, l.Target, l.prio()).Inc()
	r.requestTotal.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Inc()
}

// RequestError counts an error with its canonical code (RecordRequestErrCounter).
func (r *Registry) RequestError(l Labels, code string) {
	if code == "" {
		return
	}
	r.requestErrorsLegacy.WithLabelValues(l.Model, l.Target, code).Inc()
	r.requestErrors.WithLabelValues(l.Model, l.Target, l.fair(), l.prio(), code).Inc()
}

// RequestSize records the request body size.
func (r *Registry) RequestSize(l Labels, n int) {
	r.requestSizeLegacy.WithLabelValues(l.Model, l.Target).Observe(float64(n))
	r.requestSize.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(float64(n))
}

// Running moves the running-requests gauges; the EPP skips an empty model.
func (r *Registry) Running(l Labels, delta float64) {
	if l.Model == "" {
		return
	}
	r.runningLegacy.WithLabelValues(l.Model).Add(delta)
	r.running.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Add(delta)
}

// Completion is what HandleResponseBody records at end of stream.
type Completion struct {
	Received, FirstToken, Complete time.Time
	Streaming                      bool
	ResponseSize                   int
	PromptTokens, CompletionTokens int
}

// Complete records latency, sizes, tokens, NTPOT, TTFT and TPOT.
func (r *Registry) Complete(l Labels, c Completion) {
	if c.PromptTokens > 0 {
		r.inputTokensLegacy.WithLabelValues(l.Model, l.Target).Observe(float64(c.PromptTokens))
		r.inputTokens.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(float64(c.PromptTokens))
	}
	if c.CompletionTokens > 0 {
		r.outputTokensLegacy.WithLabelValues(l.Model, l.Target).Observe(float64(c.CompletionTokens))
		r.outputTokens.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(float64(c.CompletionTokens))
	}
	if c.Complete.After(c.Received) {
		e2e := c.Complete.Sub(c.Received).Seconds()
		if c.CompletionTokens > 0 {
			r.ntpotLegacy.WithLabelValues(l.Model, l.Target).Observe(e2e / float64(c.CompletionTokens))
			r.ntpot.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(e2e / float64(c.CompletionTokens))
		}
		r.requestLatencyLegacy.WithLabelValues(l.Model, l.Target).Observe(e2e)
		r.requestLatency.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(e2e)
	}
	r.responseSizeLegacy.WithLabelValues(l.Model, l.Target).Observe(float64(c.ResponseSize))
	r.responseSize.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(float64(c.ResponseSize))
	if !c.FirstToken.IsZero() && c.FirstToken.After(c.Received) {
		r.ttft.WithLabelValues(l.Model, l.Target, l.fair(), l.prio(), strconv.FormatBool(c.Streaming)).Observe(c.FirstToken.Sub(c.Received).Seconds())
		if c.Streaming && c.CompletionTokens > 1 && c.Complete.After(c.FirstToken) {
			tpot := c.Complete.Sub(c.FirstToken).Seconds() / float64(c.CompletionTokens-1)
			r.tpot.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(tpot)
		}
	}
}

// InterTokenLatency records the gap between streamed chunks.
func (r *Registry) InterTokenLatency(l Labels, seconds float64) {
	r.itl.WithLabelValues(l.Model, l.Target, l.fair(), l.prio()).Observe(seconds)
}

// PoolSummary is the refresher's view over fresh endpoints.
type PoolSummary struct {
	Ready                       int
	AvgKV, AvgQueue, AvgRunning float64
	StdKV, StdQueue, StdRunning float64
}

// Pool records the pool gauges (refreshPrometheusMetrics): ready always,
// the averages only when some endpoint is fresh.
func (r *Registry) Pool(name string, s PoolSummary) {
	r.readyLegacy.WithLabelValues(name).Set(float64(s.Ready))
	r.ready.WithLabelValues(name).Set(float64(s.Ready))
	if s.Ready == 0 {
		return
	}
	r.avgKVLegacy.WithLabelValues(name).Set(s.AvgKV)
	r.avgKV.WithLabelValues(name).Set(s.AvgKV)
	r.avgQueueLegacy.WithLabelValues(name).Set(s.AvgQueue)
	r.avgQueue.WithLabelValues(name).Set(s.AvgQueue)
	r.avgRunningLegacy.WithLabelValues(name).Set(s.AvgRunning)
	r.avgRunning.WithLabelValues(name).Set(s.AvgRunning)
	r.stdKV.WithLabelValues(name).Set(s.StdKV)
	r.stdQueue.WithLabelValues(name).Set(s.StdQueue)
	r.stdRunning.WithLabelValues(name).Set(s.StdRunning)
}

// SchedulerE2E records one Schedule call.
func (r *Registry) SchedulerE2E(d time.Duration) {
	r.schedE2ELegacy.WithLabelValues().Observe(d.Seconds())
	r.schedE2E.WithLabelValues().Observe(d.Seconds())
}

// SchedulerAttempt records an attempt; endpoint fields are empty on failure.
func (r *Registry) SchedulerAttempt(status, target, endpoint, namespace, port string) {
	r.schedAttemptsLegacy.WithLabelValues(status, target, endpoint, namespace, port).Inc()
	r.schedAttempts.WithLabelValues(status, target, endpoint, namespace, port).Inc()
}

// Plugin records one plugin call at an extension point. The pair of
// observers is cached per label set: this runs several times per request.
func (r *Registry) Plugin(point, typ, name string, d time.Duration) {
	key := [3]string{point, typ, name}
	obs, ok := r.pluginObs.Load(key)
	if !ok {
		obs, _ = r.pluginObs.LoadOrStore(key, [2]prometheus.Observer{
			r.pluginLegacy.WithLabelValues(point, typ, name), r.plugin.WithLabelValues(point, typ, name)})
	}
	pair := obs.([2]prometheus.Observer)
	pair[0].Observe(d.Seconds())
	pair[1].Observe(d.Seconds())
}

// RequestProcessing records the request-phase EPP latency.
func (r *Registry) RequestProcessing(d time.Duration) {
	r.reqProc.WithLabelValues().Observe(d.Seconds())
}

// ResponseProcessing records the response-phase EPP latency.
func (r *Registry) ResponseProcessing(d time.Duration) {
	r.respProc.WithLabelValues().Observe(d.Seconds())
}

// Info sets the build info gauges.
func (r *Registry) Info(commit, ref string) {
	r.infoLegacy.WithLabelValues(commit, ref).Set(1)
	r.info.WithLabelValues(commit, ref).Set(1)
}

// PollError counts a failed data-source poll.
func (r *Registry) PollError(sourceType string) {
	r.pollErrorsLegacy.WithLabelValues(sourceType).Inc()
	r.pollErrors.WithLabelValues(sourceType).Inc()
}

// ExtractError counts a failed extraction.
func (r *Registry) ExtractError(sourceType, extractorType string) {
	r.extractErrorsLegacy.WithLabelValues(sourceType, extractorType).Inc()
	r.extractErrors.WithLabelValues(sourceType, extractorType).Inc()
}

// DisaggDecision counts a P/D decision (RecordDisaggDecision); model
// "unknown" when empty.
func (r *Registry) DisaggDecision(pluginName, pluginType, model, decision string) {
	if model == "" {
		model = "unknown"
	}
	r.disaggLegacy.WithLabelValues(model, decision).Inc()
	r.disagg.WithLabelValues(pluginName, pluginType, model, decision).Inc()
}

// PrefixIndexerSize sets the indexer's total entries.
func (r *Registry) PrefixIndexerSize(pluginName, pluginType string, n int64) {
	r.prefixSizeLegacy.WithLabelValues().Set(float64(n))
	r.prefixSize.WithLabelValues(pluginName, pluginType).Set(float64(n))
}

// PrefixMatch records a lookup's hit ratio and matched bytes
// (recordPrefixCacheMatch: lengths are byte estimates).
func (r *Registry) PrefixMatch(pluginName, pluginType string, matchedBytes, totalBytes int) {
	r.prefixBytesLegacy.WithLabelValues().Observe(float64(matchedBytes))
	r.prefixBytes.WithLabelValues(pluginName, pluginType).Observe(float64(matchedBytes))
	if totalBytes > 0 {
		ratio := float64(matchedBytes) / float64(totalBytes)
		r.prefixRatioLegacy.WithLabelValues().Observe(ratio)
		r.prefixRatio.WithLabelValues(pluginName, pluginType).Observe(ratio)
	}
}

// PerEndpointQueue is the collector of inference_pool.go: one series per
// endpoint of the datastore, read at scrape time.
type PerEndpointQueue struct {
	Pool      func() (string, bool)
	Endpoints func() []QueueSample
}

// QueueSample is one endpoint's waiting-queue size.
type QueueSample struct {
	EndpointName string
	Waiting      int
}

var (
	descPerPod = prometheus.NewDesc("inference_pool_per_pod_queue_size",
		alpha("The total number of requests pending in the model server queue for each underlying pod."),
		[]string{"name", "model_server_pod"}, nil)
	descPerEndpoint = prometheus.NewDesc("llm_d_epp_per_endpoint_queue_size",
		alpha("The total number of requests pending in the model server queue for each underlying endpoint."),
		[]string{"name", "model_server_endpoint"}, nil)
)

// Describe implements prometheus.Collector.
func (c *PerEndpointQueue) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPerPod
	ch <- descPerEndpoint
}

// Collect implements prometheus.Collector.
func (c *PerEndpointQueue) Collect(ch chan<- prometheus.Metric) {
	pool, ok := c.Pool()
	if !ok {
		return
	}
	for _, s := range c.Endpoints() {
		ch <- prometheus.MustNewConstMetric(descPerPod, prometheus.GaugeValue, float64(s.Waiting), pool, s.EndpointName)
		ch <- prometheus.MustNewConstMetric(descPerEndpoint, prometheus.GaugeValue, float64(s.Waiting), pool, s.EndpointName)
	}
}
