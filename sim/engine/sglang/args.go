package sglang

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	ap "github.com/gpustack/routing-conformance/sim/engine/internal/argparse"
	"github.com/gpustack/routing-conformance/sim/engine/internal/pyrepr"
)

// Version is the SGLang release the program imitates.
const Version = "0.5.18"

// Sim defaults for what SGLang derives from the GPU and the model: a 32K
// context and a 131,072-token KV pool (max_total_num_tokens), from which
// SGLang sizes max_running_requests = clamp(pool/context*512, 2048, 4096).
const (
	defaultContextLen = 32768
	defaultKVTokens   = 131072
	defaultMemFrac    = 0.88
)

// config is the parsed launch_server command line.
type config struct {
	modelPath   string
	servedName  string
	host        string
	port        int
	contextLen  int
	memFraction float64
	maxRunning  int
	maxTotal    int
	pageSize    int
	noRadix     bool
	cacheReport bool
	metrics     bool
	tp, pp, dp  int
	disaggMode  string
	bootstrap   int
	distInit    string
	skipWarmup  bool
	logLevel    string
	logHTTP     string
	apiKey      string
	includeUse  bool // --stream-response-default-include-usage
	decodeLog   int
	extraLabels map[string]string
	customHdr   string
	customKeys  []string
	ttftBuckets []float64
	itlBuckets  []float64
	e2eBuckets  []float64

	given map[string]string // for the server_args log line and /server_info
}

// maxNewTokens is the generation limit the scheduler sets for a prompt of p
// tokens: the request's (limit < 0: none, which is 1<<30) capped at what the
// context and the KV pool leave, max_req_len - p - 1 with max_req_len =
// min(context_len - 1, max_total_tokens - 1), and max_total_tokens -
// ceil_page(p) - page_size - 1 (Scheduler.init_req_max_new_tokens and
// TpModelWorker's max_req_len in SGLang 0.5.18).
func (c *config) maxNewTokens(limit, p int) int {
	if limit < 0 {
		limit = 1 << 30
	}
	page := max(c.pageSize, 1)
	maxReqLen := min(c.contextLen-1, c.maxTotal-1)
	paged := (p + page - 1) / page * page
	return max(0, min(limit, maxReqLen-p-1, c.maxTotal-paged-page-1))
}

// engineType is the metrics' engine_type label.
func (c *config) engineType() string {
	switch c.disaggMode {
	case "prefill", "decode":
		return c.disaggMode
	}
	return "unified"
}

func st(flags ...string) *ap.Option  { return &ap.Option{Flags: flags, Action: ap.StoreTrue} }
func str(flags ...string) *ap.Option { return &ap.Option{Flags: flags} }
func in(flags ...string) *ap.Option  { return &ap.Option{Flags: flags, Check: ap.Int} }
func fl(flags ...string) *ap.Option  { return &ap.Option{Flags: flags, Check: ap.Float} }
func many(flags ...string) *ap.Option {
	return &ap.Option{Flags: flags, Nargs: ap.OneOrMore}
}
func floats(flags ...string) *ap.Option {
	return &ap.Option{Flags: flags, Nargs: ap.OneOrMore, Check: ap.Float}
}
func choice(c []string, flags ...string) *ap.Option {
	return &ap.Option{Flags: flags, Choices: c}
}
func dest(o *ap.Option, d string) *ap.Option { o.Dest = d; return o }

// options are ServerArgs.add_cli_args' flags the sim knows. It honours the
// ones that shape serving and accepts the GPU-only ones with their types
// checked.
func options() []*ap.Option {
	return []*ap.Option{
		// Model and tokenizer
		{Flags: []string{"--model-path", "--model"}, Dest: "model_path", Required: true},
		str("--tokenizer-path"), choice([]string{"auto", "slow"}, "--tokenizer-mode"), in("--tokenizer-worker-num"),
		st("--skip-tokenizer-init"), str("--load-format"), str("--model-loader-extra-config"), st("--trust-remote-code"),
		in("--context-length"), st("--is-embedding"), st("--enable-multimodal"), str("--revision"), str("--model-impl"),
		// HTTP server
		str("--host"), in("--port"), st("--skip-server-warmup"), str("--warmups"), in("--nccl-port"),
		in("--fastapi-root-path"), st("--grpc-mode"),
		// Quantization and data type
		str("--dtype"), str("--quantization"), str("--quantization-param-path"), str("--kv-cache-dtype"),
		st("--enable-fp32-lm-head"),
		// Memory and scheduling
		fl("--mem-fraction-static"), in("--max-running-requests"), in("--max-queued-requests"), in("--max-total-tokens"),
		in("--chunked-prefill-size"), in("--max-prefill-tokens"), str("--schedule-policy"),
		st("--enable-priority-scheduling"), st("--schedule-low-priority-values-first"),
		in("--priority-scheduling-preemption-threshold"), fl("--schedule-conservativeness"), in("--page-size"),
		fl("--hybrid-kvcache-ratio"), fl("--swa-full-tokens-ratio"), st("--disable-hybrid-swa-memory"),
		str("--radix-eviction-policy"),
		// Runtime
		str("--device"), dest(in("--tensor-parallel-size", "--tp-size"), "tp_size"),
		dest(in("--pipeline-parallel-size", "--pp-size"), "pp_size"), in("--pp-max-micro-batch-size"),
		in("--stream-interval"), st("--stream-output"), in("--random-seed"), str("--constrained-json-whitespace-pattern"),
		fl("--watchdog-timeout"), in("--dist-timeout"), str("--download-dir"), in("--base-gpu-id"), in("--gpu-id-step"),
		st("--sleep-on-idle"),
		// Logging
		str("--log-level"), str("--log-level-http"), st("--log-requests"), in("--log-requests-level"),
		str("--crash-dump-folder"), st("--show-time-cost"), st("--enable-metrics"), st("--enable-metrics-for-all-schedulers"),
		str("--tokenizer-metrics-custom-labels-header"), many("--tokenizer-metrics-allowed-custom-labels"),
		floats("--bucket-time-to-first-token"), floats("--bucket-inter-token-latency"), floats("--bucket-e2e-request-latency"),
		st("--collect-tokens-histogram"), many("--prompt-tokens-buckets"), many("--generation-tokens-buckets"),
		fl("--gc-warning-threshold-secs"), in("--decode-log-interval"), st("--enable-request-time-stats-logging"),
		str("--kv-events-config"), st("--enable-trace"), str("--oltp-traces-endpoint"), str("--extra-metric-labels"),
		// API
		str("--api-key"), str("--served-model-name"), str("--weight-version"), str("--chat-template"),
		str("--completion-template"), str("--file-storage-path"), st("--enable-cache-report"), str("--reasoning-parser"),
		str("--tool-call-parser"), str("--tool-server"), st("--stream-response-default-include-usage"),
		// Data parallelism
		dest(in("--data-parallel-size", "--dp-size"), "dp_size"), str("--load-balance-method"),
		// Multi-node
		dest(str("--dist-init-addr", "--nccl-init-addr"), "dist_init_addr"), in("--nnodes"), in("--node-rank"),
		// Model override
		str("--json-model-override-args"), str("--preferred-sampling-params"),
		// LoRA
		st("--enable-lora"), in("--max-lora-rank"), many("--lora-target-modules"), many("--lora-paths"),
		in("--max-loras-per-batch"), in("--max-loaded-loras"), str("--lora-backend"),
		// Kernels
		str("--attention-backend"), str("--prefill-attention-backend"), str("--decode-attention-backend"),
		str("--sampling-backend"), str("--grammar-backend"), str("--mm-attention-backend"),
		// Speculative decoding
		str("--speculative-algorithm"), str("--speculative-draft-model-path"), in("--speculative-num-steps"),
		in("--speculative-eagle-topk"), in("--speculative-num-draft-tokens"),
		// Expert parallelism
		dest(in("--expert-parallel-size", "--ep-size"), "ep_size"), str("--moe-a2a-backend"), str("--moe-runner-backend"),
		st("--enable-eplb"), str("--deepep-mode"), in("--ep-num-redundant-experts"), str("--init-expert-location"),
		// Hierarchical cache
		st("--enable-hierarchical-cache"), fl("--hicache-ratio"), in("--hicache-size"), str("--hicache-write-policy"),
		str("--hicache-storage-backend"), st("--enable-lmcache"),
		// Optimizations
		st("--disable-radix-cache"), in("--cuda-graph-max-bs"), many("--cuda-graph-bs"), st("--disable-cuda-graph"),
		st("--disable-cuda-graph-padding"), st("--enable-profile-cuda-graph"), st("--enable-nccl-nvls"),
		st("--enable-symm-mem"), st("--disable-outlines-disk-cache"), st("--disable-custom-all-reduce"),
		st("--enable-mscclpp"), st("--disable-overlap-schedule"), st("--enable-mixed-chunk"), st("--enable-dp-attention"),
		st("--enable-dp-lm-head"), st("--enable-two-batch-overlap"), st("--enable-torch-compile"),
		in("--torch-compile-max-bs"), str("--torchao-config"), st("--enable-nan-detection"), st("--enable-p2p-check"),
		st("--triton-attention-reduce-in-fp32"), in("--triton-attention-num-kv-splits"),
		in("--num-continuous-decode-steps"), st("--delete-ckpt-after-loading"), st("--enable-memory-saver"),
		st("--allow-auto-truncate"), st("--enable-custom-logit-processor"), st("--disable-shared-experts-fusion"),
		st("--disable-chunked-prefix-cache"), st("--disable-fast-image-processor"), st("--enable-return-hidden-states"),
		st("--enable-deterministic-inference"), fl("--cpu-offload-gb"), in("--offload-group-size"),
		in("--max-mamba-cache-size"), st("--keep-mm-feature-on-device"), st("--enable-flashinfer-allreduce-fusion"),
		// PD disaggregation
		choice([]string{"null", "prefill", "decode"}, "--disaggregation-mode"),
		choice([]string{"mooncake", "mooncake_tcp", "nixl", "ascend", "fake"}, "--disaggregation-transfer-backend"),
		in("--disaggregation-bootstrap-port"), in("--disaggregation-decode-tp"), in("--disaggregation-decode-dp"),
		in("--disaggregation-prefill-pp"), str("--disaggregation-ib-device"), in("--num-reserved-decode-tokens"),
		st("--disaggregation-decode-enable-offload-kvcache"), st("--enable-pdmux"),
		// Custom weight loader
		many("--custom-weight-loader"), st("--weight-loader-disable-mmap"),
	}
}

func parser() *ap.Parser { return &ap.Parser{Prog: "launch_server.py", Options: options()} }

// parseArgs parses argv (after `python3 -m sglang.launch_server`).
func parseArgs(argv []string) (*config, error) {
	p := parser()
	r, err := p.Parse(argv)
	if err != nil {
		return nil, err
	}
	c := &config{
		modelPath:   r.String("model_path", ""),
		host:        r.String("host", "127.0.0.1"),
		port:        r.IntValue("port", 30000),
		contextLen:  r.IntValue("context_length", defaultContextLen),
		memFraction: r.FloatValue("mem_fraction_static", defaultMemFrac),
		maxTotal:    r.IntValue("max_total_tokens", 0),
		maxRunning:  r.IntValue("max_running_requests", 0),
		pageSize:    r.IntValue("page_size", 1),
		noRadix:     r.Bool("disable_radix_cache", false),
		cacheReport: r.Bool("enable_cache_report", false),
		metrics:     r.Bool("enable_metrics", false),
		tp:          r.IntValue("tp_size", 1),
		pp:          r.IntValue("pp_size", 1),
		dp:          r.IntValue("dp_size", 1),
		disaggMode:  r.String("disaggregation_mode", "null"),
		bootstrap:   r.IntValue("disaggregation_bootstrap_port", 8998),
		distInit:    r.String("dist_init_addr", ""),
		skipWarmup:  r.Bool("skip_server_warmup", false),
		logLevel:    strings.ToLower(r.String("log_level", "info")),
		apiKey:      r.String("api_key", ""),
		includeUse:  r.Bool("stream_response_default_include_usage", false),
		decodeLog:   r.IntValue("decode_log_interval", 40),
		customHdr:   r.String("tokenizer_metrics_custom_labels_header", "x-custom-labels"),
		customKeys:  r.Strings("tokenizer_metrics_allowed_custom_labels"),
		given:       map[string]string{},
	}
	c.logHTTP = strings.ToLower(r.String("log_level_http", c.logLevel))
	c.servedName = r.String("served_model_name", c.modelPath)
	if c.maxTotal <= 0 {
		c.maxTotal = max(int(float64(defaultKVTokens)*c.memFraction/defaultMemFrac), 1)
	}
	if c.maxRunning <= 0 {
		c.maxRunning = min(max(c.maxTotal/c.contextLen*512, 2048), 4096)
	}
	if c.pageSize < 1 {
		return nil, p.Errorf("argument --page-size: page_size must be at least 1, got %d", c.pageSize)
	}
	if c.decodeLog < 1 {
		c.decodeLog = 40
	}
	if v := r.String("extra_metric_labels", ""); v != "" {
		if err := json.Unmarshal([]byte(v), &c.extraLabels); err != nil {
			return nil, p.Errorf("argument --extra-metric-labels: invalid loads value: '%s'", v)
		}
	}
	for _, b := range []struct {
		dest string
		dst  *[]float64
	}{{"bucket_time_to_first_token", &c.ttftBuckets}, {"bucket_inter_token_latency", &c.itlBuckets}, {"bucket_e2e_request_latency", &c.e2eBuckets}} {
		for _, s := range r.Strings(b.dest) {
			var f float64
			_, _ = fmt.Sscan(s, &f)
			*b.dst = append(*b.dst, f)
		}
	}
	for _, o := range p.Options {
		if r.Has(o.Dest) {
			c.given[o.Dest] = r.String(o.Dest, "True")
		}
	}
	return c, nil
}

// serverArgsRepr is the start-up "server_args=ServerArgs(...)" line body.
func (c *config) serverArgsRepr() string {
	fields := []string{
		fmt.Sprintf("model_path=%s", pyrepr.Str(c.modelPath)),
		fmt.Sprintf("tokenizer_path=%s", pyrepr.Str(c.modelPath)),
		fmt.Sprintf("host=%s", pyrepr.Str(c.host)),
		fmt.Sprintf("port=%d", c.port),
		fmt.Sprintf("mem_fraction_static=%s", pyFloat(c.memFraction)),
		fmt.Sprintf("max_running_requests=%d", c.maxRunning),
		fmt.Sprintf("max_total_tokens=%d", c.maxTotal),
		fmt.Sprintf("page_size=%d", c.pageSize),
		fmt.Sprintf("tp_size=%d", c.tp),
		fmt.Sprintf("pp_size=%d", c.pp),
		fmt.Sprintf("dp_size=%d", c.dp),
		fmt.Sprintf("served_model_name=%s", pyrepr.Str(c.servedName)),
		fmt.Sprintf("enable_metrics=%s", pyrepr.Bool(c.metrics)),
		fmt.Sprintf("enable_cache_report=%s", pyrepr.Bool(c.cacheReport)),
		fmt.Sprintf("disable_radix_cache=%s", pyrepr.Bool(c.noRadix)),
		fmt.Sprintf("disaggregation_mode=%s", pyrepr.Str(c.disaggMode)),
		fmt.Sprintf("log_level=%s", pyrepr.Str(c.logLevel)),
	}
	var extra []string
	for k, v := range c.given {
		switch k {
		case "model_path", "host", "port", "mem_fraction_static", "max_running_requests", "max_total_tokens",
			"page_size", "tp_size", "pp_size", "dp_size", "served_model_name", "enable_metrics", "enable_cache_report",
			"disable_radix_cache", "disaggregation_mode", "log_level", "api_key":
			continue
		}
		extra = append(extra, fmt.Sprintf("%s=%s", k, pyrepr.Str(v)))
	}
	sort.Strings(extra)
	return strings.Join(append(fields, extra...), ", ")
}
