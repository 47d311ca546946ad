package datalayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpustack/routing-conformance/sim/llmd/framework"
)

// Plugin types of the metrics source and extractor.
const (
	SourceType    = "metrics-data-source"
	ExtractorType = "core-metrics-extractor"
	// EngineTypeLabel picks an endpoint's engine mapping; unlabelled Pods use
	// the default engine (vllm).
	EngineTypeLabel       = "llm-d.ai/engine-type"
	legacyEngineTypeLabel = "inference.networking.k8s.io/engine-type"
	defaultEngineKey      = "default"
)

// stepTimeout bounds each poll (source/http/datasource.go defaultStepTimeout).
const stepTimeout = time.Second

// Source is metrics-data-source: GET <scheme>://<MetricsHost><path>.
type Source struct {
	name         string
	Scheme, Path string
	// Port overrides the endpoint's port when set.
	Port     *int
	Interval time.Duration
	client   *http.Client
}

// TypedName implements framework.Plugin.
func (s *Source) TypedName() framework.TypedName {
	return framework.TypedName{Type: SourceType, Name: s.name}
}

// DataSource marks s as a data-layer source for the loader.
func (s *Source) DataSource() {}

type sourceParams struct {
	Scheme             string `json:"scheme"`
	Path               string `json:"path"`
	Port               *int   `json:"port,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
	CACertPath         string `json:"caCertPath"`
	ClientCertPath     string `json:"clientCertPath"`
	ClientKeyPath      string `json:"clientKeyPath"`
	Interval           string `json:"interval"`
}

// NewSource is MetricsDataSourceFactory.
func NewSource(name string, dec *json.Decoder, client *http.Client) (*Source, error) {
	p := sourceParams{Scheme: "http", Path: "/metrics", InsecureSkipVerify: true}
	if dec != nil {
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
	}
	if p.Port != nil && (*p.Port < 1 || *p.Port > 65535) {
		return nil, fmt.Errorf("invalid port %d: must be between 1 and 65535", *p.Port)
	}
	var interval time.Duration
	if p.Interval != "" {
		d, err := time.ParseDuration(p.Interval)
		if err != nil {
			return nil, fmt.Errorf("invalid interval %q: %w", p.Interval, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("interval must be non-negative, got %s", d)
		}
		interval = d
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return nil, fmt.Errorf("unsupported scheme: %s", p.Scheme)
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Source{name: name, Scheme: p.Scheme, Path: p.Path, Port: p.Port, Interval: interval, client: client}, nil
}

// Poll fetches and parses the endpoint's metrics.
func (s *Source) Poll(ctx context.Context, m *framework.EndpointMetadata) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	host := m.MetricsHost
	if s.Port != nil {
		host = net.JoinHostPort(m.Address, strconv.Itoa(*s.Port))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Scheme+"://"+host+s.Path, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to create request: %v", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch data from %s: %w", m.ID(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("unexpected status code from %s: %v", m.ID(), resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(resp.Body)
}

// Spec is a PromQL-instant-selector-like metric spec: name{label=value,...}.
type Spec struct {
	Name   string
	Labels map[string]string
}

var (
	specRE      = regexp.MustCompile(`^\s*(\S+?)\s*(?:\{([^}]*)\})?\s*$`)
	labelPairRE = regexp.MustCompile(`^\s*(\S+?)\s*=\s*"([^"]*)"\s*$`)
	addQuotesRE = regexp.MustCompile(`(\w+)\s*=\s*([^",}\s]+)`)
)

// ParseSpec is parseStringToSpec; "" is the nil spec.
func ParseSpec(spec string) (*Spec, error) {
	if spec == "" {
		return nil, nil
	}
	quoted := addQuotesRE.ReplaceAllString(spec, `$1="$2"`)
	m := specRE.FindStringSubmatch(quoted)
	if m == nil || !model.LegacyValidation.IsValidMetricName(m[1]) {
		return nil, fmt.Errorf("not a valid metric specification: %q", spec)
	}
	labels := map[string]string{}
	if block := strings.TrimSpace(m[2]); block != "" {
		for _, pair := range strings.Split(block, ",") {
			lm := labelPairRE.FindStringSubmatch(pair)
			if lm == nil || !model.LegacyValidation.IsValidLabelName(lm[1]) {
				return nil, fmt.Errorf("invalid label pair %q in specification: %q", pair, spec)
			}
			labels[lm[1]] = lm[2]
		}
	}
	return &Spec{Name: m[1], Labels: labels}, nil
}

// latest is getLatestMetric: the matching series with the newest timestamp.
func (s *Spec) latest(fams map[string]*dto.MetricFamily) (*dto.Metric, error) {
	fam, ok := fams[s.Name]
	if !ok {
		return nil, fmt.Errorf("metric family %q not found", s.Name)
	}
	if len(fam.GetMetric()) == 0 {
		return nil, fmt.Errorf("no metrics found for %q", s.Name)
	}
	var best *dto.Metric
	recent := int64(-1)
	for _, m := range fam.GetMetric() {
		if !labelsMatch(s.Labels, m.GetLabel()) {
			continue
		}
		if ts := m.GetTimestampMs(); ts > recent {
			recent, best = ts, m
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no matching metric found for %q with labels %v", s.Name, s.Labels)
	}
	return best, nil
}

func labelsMatch(want map[string]string, got []*dto.LabelPair) bool {
	for k, v := range want {
		found := false
		for _, l := range got {
			if l.GetName() == k {
				found = l.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return 0
}

// Mapping is an engine's metric table.
type Mapping struct {
	Queue, Running, KV, CacheInfo  *Spec
	BlockSizeLabel, NumBlocksLabel string
}

// EngineConfig is one engineConfigs[] entry (the fields the emulation reads;
// the rest are decoded so strict parsing accepts them).
type EngineConfig struct {
	Name                    string `json:"name"`
	QueuedRequestsSpec      string `json:"queuedRequestsSpec"`
	RunningRequestsSpec     string `json:"runningRequestsSpec"`
	KVUsageSpec             string `json:"kvUsageSpec"`
	LoRASpec                string `json:"loraSpec"`
	CacheInfoSpec           string `json:"cacheInfoSpec"`
	CacheBlockSizeLabelName string `json:"cacheBlockSizeLabelName,omitempty"`
	CacheNumBlocksLabelName string `json:"cacheNumBlocksLabelName,omitempty"`
	CacheBlockSizeSpec      string `json:"cacheBlockSizeSpec,omitempty"`
	CacheNumBlocksSpec      string `json:"cacheNumBlocksSpec,omitempty"`
	CustomMetrics           []struct {
		AttributeKey string `json:"attributeKey"`
		MetricSpec   string `json:"metricSpec"`
	} `json:"customMetrics,omitempty"`
}

// defaultEngineConfigs are the built-in tables appended for engines the
// config does not define (extractor/metrics/factories.go).
var defaultEngineConfigs = []EngineConfig{
	{Name: "vllm", QueuedRequestsSpec: "vllm:num_requests_waiting", RunningRequestsSpec: "vllm:num_requests_running",
		KVUsageSpec: "vllm:kv_cache_usage_perc", LoRASpec: "vllm:lora_requests_info", CacheInfoSpec: "vllm:cache_config_info"},
	{Name: "sglang", QueuedRequestsSpec: "sglang:num_queue_reqs", RunningRequestsSpec: "sglang:num_running_reqs",
		KVUsageSpec: "sglang:token_usage", CacheInfoSpec: "sglang:cache_config_info",
		CacheBlockSizeLabelName: "page_size", CacheNumBlocksLabelName: "num_pages"},
	{Name: "trtllm-serve", QueuedRequestsSpec: "trtllm_num_requests_waiting", RunningRequestsSpec: "trtllm_num_requests_running",
		KVUsageSpec: "trtllm_kv_cache_utilization", CacheBlockSizeSpec: "trtllm_kv_cache_tokens_per_block", CacheNumBlocksSpec: "trtllm_kv_cache_max_blocks"},
	{Name: "triton-tensorrt-llm", QueuedRequestsSpec: "nv_trt_llm_request_metrics{request_type=waiting}",
		RunningRequestsSpec: "nv_trt_llm_request_metrics{request_type=scheduled}",
		KVUsageSpec:         "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}",
		CacheBlockSizeSpec:  "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=tokens_per}",
		CacheNumBlocksSpec:  "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max}"},
	{Name: "triton", QueuedRequestsSpec: "nv_inference_pending_request_count", RunningRequestsSpec: "nv_inference_exec_count"},
}

// Extractor is core-metrics-extractor.
type Extractor struct {
	name     string
	labelKey string
	mappings map[string]*Mapping
	// Registered is the engines in registration order with their mapping
	// summaries, for the "Registered engine mapping" lines.
	Registered []Registered
}

// Registered is one engine mapping the factory logged.
type Registered struct {
	Engine  string
	Summary string
}

// TypedName implements framework.Plugin.
func (x *Extractor) TypedName() framework.TypedName {
	return framework.TypedName{Type: ExtractorType, Name: x.name}
}

type extractorParams struct {
	EngineLabelKey string         `json:"engineLabelKey"`
	DefaultEngine  string         `json:"defaultEngine"`
	EngineConfigs  []EngineConfig `json:"engineConfigs"`
}

// NewExtractor is CoreMetricsExtractorFactory: configured engines first,
// then the built-in ones not redefined, the default engine ("vllm") also
// registered as "default".
func NewExtractor(name string, dec *json.Decoder) (*Extractor, error) {
	p := extractorParams{EngineLabelKey: EngineTypeLabel}
	if dec != nil {
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
	}
	if p.DefaultEngine == "" {
		p.DefaultEngine = "vllm"
	}
	if p.EngineLabelKey == "" {
		p.EngineLabelKey = EngineTypeLabel
	}
	defined := map[string]bool{}
	for _, ec := range p.EngineConfigs {
		defined[ec.Name] = true
	}
	for _, d := range defaultEngineConfigs {
		if !defined[d.Name] {
			p.EngineConfigs = append(p.EngineConfigs, d)
		}
	}
	x := &Extractor{name: name, labelKey: p.EngineLabelKey, mappings: map[string]*Mapping{}}
	var def *Mapping
	for _, ec := range p.EngineConfigs {
		if ec.Name == "" {
			return nil, errors.New("engine config name cannot be empty")
		}
		if ec.Name == defaultEngineKey {
			return nil, fmt.Errorf("engine config name cannot be %q (reserved)", defaultEngineKey)
		}
		m, summary, err := newMapping(ec)
		if err != nil {
			return nil, fmt.Errorf("failed to create mapping for engine %q: %w", ec.Name, err)
		}
		if _, dup := x.mappings[ec.Name]; dup {
			return nil, fmt.Errorf("failed to register engine mapping for %q: mapping for engine type %q already exists", ec.Name, ec.Name)
		}
		x.mappings[ec.Name] = m
		x.Registered = append(x.Registered, Registered{ec.Name, summary})
		if ec.Name == p.DefaultEngine {
			def = m
		}
	}
	if def == nil {
		return nil, fmt.Errorf("defaultEngine %q not found in engineConfigs", p.DefaultEngine)
	}
	x.mappings[defaultEngineKey] = def
	return x, nil
}

func newMapping(ec EngineConfig) (*Mapping, string, error) {
	m := &Mapping{BlockSizeLabel: "block_size", NumBlocksLabel: "num_gpu_blocks"}
	if ec.CacheBlockSizeLabelName != "" {
		m.BlockSizeLabel = ec.CacheBlockSizeLabelName
	}
	if ec.CacheNumBlocksLabelName != "" {
		m.NumBlocksLabel = ec.CacheNumBlocksLabelName
	}
	var err error
	for _, f := range []struct {
		dst  **Spec
		spec string
	}{{&m.Queue, ec.QueuedRequestsSpec}, {&m.Running, ec.RunningRequestsSpec}, {&m.KV, ec.KVUsageSpec}, {&m.CacheInfo, ec.CacheInfoSpec}} {
		if *f.dst, err = ParseSpec(f.spec); err != nil {
			return nil, "", err
		}
	}
	for _, s := range []string{ec.LoRASpec, ec.CacheBlockSizeSpec, ec.CacheNumBlocksSpec} {
		if _, err := ParseSpec(s); err != nil {
			return nil, "", err
		}
	}
	var disabled []string
	for _, d := range []struct {
		name string
		on   bool
	}{{"queue", m.Queue != nil}, {"running", m.Running != nil}, {"kv", m.KV != nil}, {"lora", ec.LoRASpec != ""}, {"cacheInfo", m.CacheInfo != nil}} {
		if !d.on {
			disabled = append(disabled, d.name)
		}
	}
	summary := "Mapping{all specs enabled}"
	if len(disabled) > 0 {
		summary = "Mapping{disabled: [" + strings.Join(disabled, ", ") + "]}"
	}
	return m, summary, nil
}

// Mapping returns the table for an endpoint: its engine-type label, else
// the default engine.
func (x *Extractor) Mapping(labels map[string]string) *Mapping {
	engine := labels[x.labelKey]
	if engine == "" {
		engine = labels[legacyEngineTypeLabel]
	}
	if engine == "" {
		engine = defaultEngineKey
	}
	if m, ok := x.mappings[engine]; ok {
		return m
	}
	return x.mappings[defaultEngineKey]
}

// Extract updates cur from the families; updated is false when no spec
// matched (then the endpoint keeps its metrics and UpdateTime).
func (x *Extractor) Extract(fams map[string]*dto.MetricFamily, labels map[string]string, cur framework.Metrics, now time.Time) (framework.Metrics, bool, error) {
	m := x.Mapping(labels)
	var errs []error
	updated := false
	if m.Queue != nil {
		if v, err := m.Queue.latest(fams); err != nil {
			errs = append(errs, err)
		} else {
			cur.WaitingQueueSize, updated = int(value(v)), true
		}
	}
	if m.Running != nil {
		if v, err := m.Running.latest(fams); err != nil {
			errs = append(errs, err)
		} else {
			cur.RunningRequestsSize, updated = int(value(v)), true
		}
	}
	if m.KV != nil {
		if v, err := m.KV.latest(fams); err != nil {
			errs = append(errs, err)
		} else {
			cur.KVCacheUsagePercent, updated = value(v), true
		}
	}
	if m.CacheInfo != nil {
		if v, err := m.CacheInfo.latest(fams); err != nil {
			errs = append(errs, err)
		} else {
			cur.CacheBlockSize = 0
			for _, l := range v.GetLabel() {
				n, convErr := strconv.Atoi(l.GetValue())
				switch {
				case l.GetValue() == "":
				case l.GetName() == m.BlockSizeLabel && convErr == nil:
					cur.CacheBlockSize = n
				case l.GetName() == m.NumBlocksLabel && convErr == nil:
					cur.CacheNumBlocks = n
				case l.GetName() == m.BlockSizeLabel || l.GetName() == m.NumBlocksLabel:
					errs = append(errs, convErr)
				}
			}
			updated = true
		}
	}
	if updated {
		cur.UpdateTime = now
	}
	return cur, updated, errors.Join(errs...)
}
