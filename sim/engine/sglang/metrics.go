package sglang

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpustack/routing-conformance/sim/engine/internal/promtext"
)

// Default buckets of SGLang's TokenizerMetricsCollector and the scheduler's
// queue-time histogram.
var (
	defaultTTFTBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	defaultITLBuckets  = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
		0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0}
	defaultE2EBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
		600, 1200, 1800, 2400}
	queueTimeBuckets = []float64{0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
		200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}
)

// metrics are SGLang's two collectors in one registry. Every series is
// created lazily, as prometheus_client does for labelled metrics: the
// scheduler's on its first stats log, the tokenizer's on the first finished
// request, cached_tokens_total on the first request with cached tokens.
type metrics struct {
	reg *prometheus.Registry

	schedValues []string // values for schedNames
	running     *prometheus.GaugeVec
	usedTokens  *prometheus.GaugeVec
	tokenUsage  *prometheus.GaugeVec
	genThr      *prometheus.GaugeVec
	queue       *prometheus.GaugeVec
	grammarQ    *prometheus.GaugeVec
	hitRate     *prometheus.GaugeVec
	maxTotal    *prometheus.GaugeVec
	utilization *prometheus.GaugeVec
	queueTime   *prometheus.HistogramVec
	realtime    *prometheus.CounterVec

	tokNames     []string // model_name, engine_type, extra labels, custom label keys
	tokBase      []string // values for the non-custom names
	customKeys   []string
	promptTokens *prometheus.CounterVec
	genTokens    *prometheus.CounterVec
	cachedTokens *prometheus.CounterVec
	requests     *prometheus.CounterVec
	aborted      *prometheus.CounterVec
	ttft         *prometheus.HistogramVec
	itl          *prometheus.HistogramVec
	e2e          *prometheus.HistogramVec

	mu       sync.Mutex
	children map[string]*tokChildren

	rtOnce                       sync.Once
	rtCompute, rtCache, rtDecode prometheus.Counter
}

// tokChildren are one tokenizer label set's series, each created on its
// first use, so a series appears only once something was recorded in it
// (TTFT at a first token, num_requests_total at a first finished request,
// ...).
type tokChildren struct {
	prompt, gen, requests, cached, aborted lazyChild[prometheus.Counter]
	ttft, itl, e2e                         lazyChild[prometheus.Observer]
}

func newTokChildren(m *metrics, values []string) *tokChildren {
	c := &tokChildren{}
	c.prompt.init(m.promptTokens, values)
	c.gen.init(m.genTokens, values)
	c.requests.init(m.requests, values)
	c.cached.init(m.cachedTokens, values)
	c.aborted.init(m.aborted, values)
	c.ttft.init(m.ttft, values)
	c.itl.init(m.itl, values)
	c.e2e.init(m.e2e, values)
	return c
}

// lazyChild is one labelled child of vec, created on the first get as
// prometheus_client's .labels() creates it.
type lazyChild[T any] struct {
	vec    interface{ WithLabelValues(...string) T }
	values []string
	once   sync.Once
	child  T
}

func (l *lazyChild[T]) init(vec interface{ WithLabelValues(...string) T }, values []string) {
	l.vec, l.values = vec, values
}

func (l *lazyChild[T]) get() T {
	l.once.Do(func() { l.child = l.vec.WithLabelValues(l.values...) })
	return l.child
}

func newMetrics(c *config) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{reg: reg, children: map[string]*tokChildren{}}
	extraKeys := make([]string, 0, len(c.extraLabels))
	for k := range c.extraLabels {
		extraKeys = append(extraKeys, k)
	}
	sort.Strings(extraKeys)

	schedNames := []string{"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}
	m.schedValues = []string{c.servedName, c.engineType(), "0", "0", "0"}
	for _, k := range extraKeys {
		schedNames = append(schedNames, k)
		m.schedValues = append(m.schedValues, c.extraLabels[k])
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, schedNames)
		reg.MustRegister(v)
		return v
	}
	m.running = gauge("sglang:num_running_reqs", "The number of running requests.")
	m.usedTokens = gauge("sglang:num_used_tokens", "The number of used tokens.")
	m.tokenUsage = gauge("sglang:token_usage", "The token usage.")
	m.genThr = gauge("sglang:gen_throughput", "The generation throughput (token/s).")
	m.queue = gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
	m.grammarQ = gauge("sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.")
	m.hitRate = gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
	m.maxTotal = gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.")
	m.utilization = gauge("sglang:utilization", "The utilization.")
	m.queueTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sglang:queue_time_seconds", Help: "Histogram of queueing time in seconds.", Buckets: queueTimeBuckets}, schedNames)
	m.realtime = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sglang:realtime_tokens_total", Help: "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode."}, append(slices.Clone(schedNames), "mode"))
	reg.MustRegister(m.queueTime, m.realtime)

	m.tokNames = []string{"model_name", "engine_type"}
	m.tokBase = []string{c.servedName, c.engineType()}
	for _, k := range extraKeys {
		m.tokNames = append(m.tokNames, k)
		m.tokBase = append(m.tokBase, c.extraLabels[k])
	}
	m.customKeys = c.customKeys
	m.tokNames = append(m.tokNames, c.customKeys...)
	counter := func(name, help string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, m.tokNames)
		reg.MustRegister(v)
		return v
	}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, m.tokNames)
		reg.MustRegister(v)
		return v
	}
	m.promptTokens = counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = counter("sglang:generation_tokens_total", "Number of generation tokens processed.")
	m.cachedTokens = counter("sglang:cached_tokens_total", "Number of cached prompt tokens.")
	m.requests = counter("sglang:num_requests_total", "Number of requests processed.")
	m.aborted = counter("sglang:num_aborted_requests_total", "Number of requests aborted.")
	m.ttft = hist("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", orDefault(c.ttftBuckets, defaultTTFTBuckets))
	m.itl = hist("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", orDefault(c.itlBuckets, defaultITLBuckets))
	m.e2e = hist("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", orDefault(c.e2eBuckets, defaultE2EBuckets))
	return m
}

func orDefault(b, def []float64) []float64 {
	if len(b) > 0 {
		return b
	}
	return def
}

// style is MultiProcessCollector's layout (SGLang always runs in it).
var style = promtext.Style{Multiprocess: true}

// tokenizer returns the tokenizer series for a request whose custom-labels
// header (JSON object) is hdr. Only allowed keys are used; absent ones are "".
func (m *metrics) tokenizer(hdr string) *tokChildren {
	values := m.tokBase
	key := ""
	if len(m.customKeys) > 0 {
		var custom map[string]any
		_ = json.Unmarshal([]byte(hdr), &custom)
		values = slices.Clone(m.tokBase)
		for _, k := range m.customKeys {
			v, _ := custom[k].(string)
			values = append(values, v)
			key += v + "\x00"
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch, ok := m.children[key]; ok {
		return ch
	}
	ch := newTokChildren(m, values)
	m.children[key] = ch
	return ch
}

// schedStats is what one scheduler stats log writes.
type schedStats struct {
	running, queue, used int
	usage                float64
	hitRate              float64
	genThroughput        float64
	maxTotal             int
}

// logStats sets the scheduler gauges (scheduler_metrics_mixin log_stats).
func (m *metrics) logStats(s schedStats) {
	v := m.schedValues
	m.running.WithLabelValues(v...).Set(float64(s.running))
	m.usedTokens.WithLabelValues(v...).Set(float64(s.used))
	m.tokenUsage.WithLabelValues(v...).Set(math.Round(s.usage*100) / 100)
	m.genThr.WithLabelValues(v...).Set(s.genThroughput)
	m.queue.WithLabelValues(v...).Set(float64(s.queue))
	m.grammarQ.WithLabelValues(v...).Set(0)
	m.hitRate.WithLabelValues(v...).Set(s.hitRate)
	m.maxTotal.WithLabelValues(v...).Set(float64(s.maxTotal))
	m.utilization.WithLabelValues(v...).Set(0)
}

// addRealtime is increment_realtime_tokens: every stats log adds to all three
// modes (so all three series appear together).
func (m *metrics) addRealtime(compute, cache, decode int) {
	m.rtOnce.Do(func() {
		with := func(mode string) prometheus.Counter {
			return m.realtime.WithLabelValues(append(slices.Clone(m.schedValues), mode)...)
		}
		m.rtCompute, m.rtCache, m.rtDecode = with("prefill_compute"), with("prefill_cache"), with("decode")
	})
	m.rtCompute.Add(float64(compute))
	m.rtCache.Add(float64(cache))
	m.rtDecode.Add(float64(decode))
}
