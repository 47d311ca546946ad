package vllm

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpustack/routing-conformance/sim/engine/internal/promtext"
	"github.com/gpustack/routing-conformance/sim/engine/internal/pyrepr"
	"github.com/gpustack/routing-conformance/sim/engine/internal/sched"
)

// Bucket layouts of vllm/v1/metrics/loggers.py (unchanged from 0.8 to the
// newest code read).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
		20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	paramsNBuckets        = []float64{1, 2, 5, 10, 20}
	// prometheus-fastapi-instrumentator's defaults.
	highrBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5,
		3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60}
	lowrBuckets = []float64{0.1, 0.5, 1}
)

// build125Buckets is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ...
// up to max.
func build125Buckets(maxValue int) []float64 {
	var out []float64
	for exp := 1.0; ; exp *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := m * exp
			if v > float64(maxValue) {
				return out
			}
			out = append(out, v)
		}
	}
}

// Finish reasons in vLLM's FinishReason enum order.
var finishReasons = []string{"stop", "length", "abort", "error", "repetition"}

// metrics holds the children of every vLLM series for this server's one
// engine (engine="0"), all created at start-up so they exist at 0.
type metrics struct {
	// reg is what /metrics serves: the instrumentator's http_* series, plus
	// the engine's vllm:* series unless --disable-log-stats (then vLLM
	// creates no stat loggers; the engine series are still updated here but
	// never exposed).
	reg   prometheus.Gatherer
	style promtext.Style

	sched *schedCollector

	prefixQueries, prefixHits, promptTokens, promptCached, genTokens prometheus.Counter
	bySourceCompute, bySourceCache, bySourceExternal                 prometheus.Counter
	extQueries, extHits                                              prometheus.Counter
	success                                                          map[string]prometheus.Counter

	promptTokensHist, genTokensHist, iterationTokens, maxGenTokens, paramsN, paramsMaxTokens prometheus.Observer
	ttft, itl, tpot, e2e, queue, inference, prefill, decode, prefillKV                       prometheus.Observer

	httpTotal      *prometheus.CounterVec
	httpInSize     *prometheus.SummaryVec
	httpOutSize    *prometheus.SummaryVec
	httpHighr      prometheus.Histogram
	httpLowr       *prometheus.HistogramVec
	cacheInfoOrder []string
}

func newMetrics(c *config) *metrics {
	reg := prometheus.NewRegistry()
	httpReg := prometheus.NewRegistry()
	labels := []string{"model_name", "engine"}
	lv := []string{c.servedName(), "0"}
	m := &metrics{reg: prometheus.Gatherers{httpReg, reg}, success: map[string]prometheus.Counter{}}
	if c.disableLogStats {
		m.reg = httpReg
	}

	counter := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v.WithLabelValues(lv...)
	}
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		reg.MustRegister(v)
		return v.WithLabelValues(lv...)
	}

	m.sched = &schedCollector{
		lv:       lv,
		running:  prometheus.NewDesc("vllm:num_requests_running", "Number of requests in model execution batches.", labels, nil),
		waiting:  prometheus.NewDesc("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, nil),
		byReason: prometheus.NewDesc("vllm:num_requests_waiting_by_reason", "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "+"'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "+"Sum of all reasons equals vllm:num_requests_waiting.", append(slices.Clone(labels), "reason"), nil),
		kv:       prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, nil),
	}
	reg.MustRegister(m.sched)
	sleep := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:engine_sleep_state",
		Help: "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; " +
			"weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."}, append(labels, "sleep_state"))
	reg.MustRegister(sleep)
	sleep.WithLabelValues(c.servedName(), "0", "awake").Set(1)
	sleep.WithLabelValues(c.servedName(), "0", "weights_offloaded")
	sleep.WithLabelValues(c.servedName(), "0", "discard_all")

	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.extQueries = counter("vllm:external_prefix_cache_queries_total", "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.")
	m.extHits = counter("vllm:external_prefix_cache_hits_total", "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.")
	counter("vllm:mm_cache_queries_total", "Multi-modal cache queries, in terms of number of queried items.")
	counter("vllm:mm_cache_hits_total", "Multi-modal cache hits, in terms of number of cached items.")
	counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	bySource := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prompt_tokens_by_source_total", Help: "Number of prompt tokens by source."}, append(labels, "source"))
	reg.MustRegister(bySource)
	m.bySourceCompute = bySource.WithLabelValues(c.servedName(), "0", "local_compute")
	m.bySourceCache = bySource.WithLabelValues(c.servedName(), "0", "local_cache_hit")
	m.bySourceExternal = bySource.WithLabelValues(c.servedName(), "0", "external_kv_transfer")
	m.promptCached = counter("vllm:prompt_tokens_cached_total", "Number of cached prompt tokens (local + external).")
	m.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	success := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Count of successfully processed requests."}, append(labels, "finished_reason"))
	reg.MustRegister(success)
	for _, r := range finishReasons {
		m.success[r] = success.WithLabelValues(c.servedName(), "0", r)
	}

	tokenBuckets := build125Buckets(c.maxModelLen)
	m.promptTokensHist = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokenBuckets)
	m.genTokensHist = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokenBuckets)
	m.iterationTokens = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationTokenBuckets)
	m.maxGenTokens = hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", tokenBuckets)
	m.paramsN = hist("vllm:request_params_n", "Histogram of the n request parameter.", paramsNBuckets)
	m.paramsMaxTokens = hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokenBuckets)
	m.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	m.tpot = hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets)
	m.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets)
	m.queue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	m.inference = hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets)
	m.prefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets)
	m.decode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets)
	m.prefillKV = hist("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed during prefill (excluding cached tokens).", tokenBuckets)

	// vllm:cache_config_info: a gauge at 1 labelled with every CacheConfig
	// field (Python str() of the value) plus engine.
	blocks := c.kvBlocks()
	info := [][2]string{
		{"block_size", strconv.Itoa(c.blockSize)},
		{"gpu_memory_utilization", pyFloatStr(c.gpuMemUtil)},
		{"kv_cache_memory_bytes", "None"},
		{"swap_space", "4"},
		{"cache_dtype", "auto"},
		{"is_attention_free", "False"},
		{"num_gpu_blocks_override", noneOrInt(c.blocksOverr)},
		{"sliding_window", "None"},
		{"enable_prefix_caching", pyrepr.Bool(c.prefixCaching)},
		{"prefix_caching_hash_algo", "sha256"},
		{"cpu_offload_gb", "0"},
		{"calculate_kv_scales", "False"},
		{"kv_sharing_fast_prefill", "False"},
		{"mamba_page_size_padded", "None"},
		{"mamba_block_size", "None"},
		{"mamba_cache_dtype", "auto"},
		{"mamba_ssm_cache_dtype", "auto"},
		{"kv_offloading_size", "None"},
		{"kv_offloading_backend", "None"},
		{"num_gpu_blocks", strconv.Itoa(blocks)},
		{"num_cpu_blocks", "None"},
		{"engine", "0"},
	}
	names := make([]string, len(info))
	values := make([]string, len(info))
	for i, kv := range info {
		names[i], values[i] = kv[0], kv[1]
	}
	cacheInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig"}, names)
	reg.MustRegister(cacheInfo)
	cacheInfo.WithLabelValues(values...).Set(1)
	m.cacheInfoOrder = names

	// prometheus-fastapi-instrumentator's default metrics.
	m.httpTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total", Help: "Total number of requests by method, status and handler."}, []string{"method", "status", "handler"})
	m.httpInSize = prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "http_request_size_bytes", Help: "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. "}, []string{"handler"})
	m.httpOutSize = prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "http_response_size_bytes", Help: "Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. "}, []string{"handler"})
	m.httpHighr = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "http_request_duration_highr_seconds", Help: "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ", Buckets: highrBuckets})
	m.httpLowr = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "http_request_duration_seconds", Help: "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. ", Buckets: lowrBuckets}, []string{"method", "handler"})
	httpReg.MustRegister(m.httpTotal, m.httpInSize, m.httpOutSize, m.httpHighr, m.httpLowr)

	m.style = promtext.Style{
		DefaultOrder: []string{"model_name", "engine"},
		LabelOrder: map[string][]string{
			"vllm:cache_config_info":              names,
			"http_requests_total":                 {"method", "status", "handler"},
			"http_request_duration_seconds":       {"method", "handler"},
			"vllm:request_success_total":          {"model_name", "engine", "finished_reason"},
			"vllm:num_requests_waiting_by_reason": {"model_name", "engine", "reason"},
			"vllm:engine_sleep_state":             {"model_name", "engine", "sleep_state"},
			"vllm:prompt_tokens_by_source_total":  {"model_name", "engine", "source"},
		},
	}
	return m
}

func pyFloatStr(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s
		}
	}
	return s + ".0"
}

func noneOrInt(n int) string {
	if n <= 0 {
		return "None"
	}
	return strconv.Itoa(n)
}

// schedCollector exposes the scheduler gauges from one scheduler snapshot
// per scrape, so running, waiting and KV usage are always mutually
// consistent (vLLM records them together once per engine step).
type schedCollector struct {
	state                          func() sched.State
	lv                             []string
	running, waiting, byReason, kv *prometheus.Desc
}

func (c *schedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.waiting
	ch <- c.byReason
	ch <- c.kv
}

func (c *schedCollector) Collect(ch chan<- prometheus.Metric) {
	var s sched.State
	if c.state != nil {
		s = c.state()
	}
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(s.Running), c.lv...)
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(s.Waiting), c.lv...)
	ch <- prometheus.MustNewConstMetric(c.byReason, prometheus.GaugeValue, float64(s.Waiting), append(slices.Clone(c.lv), "capacity")...)
	ch <- prometheus.MustNewConstMetric(c.byReason, prometheus.GaugeValue, 0, append(slices.Clone(c.lv), "deferred")...)
	ch <- prometheus.MustNewConstMetric(c.kv, prometheus.GaugeValue, s.Usage(), c.lv...)
}

// counterValue reads a counter (for the periodic stats log line).
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
