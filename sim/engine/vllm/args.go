package vllm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	ap "github.com/gpustack/routing-conformance/sim/engine/internal/argparse"
	"github.com/gpustack/routing-conformance/sim/engine/internal/pyrepr"
)

// Version is the vLLM release the program imitates (the operator's runner
// image gpustack/runner:cuda12.9-vllm0.29.0).
const Version = "0.29.0"

// DefaultModel is what `vllm serve` serves with no model argument.
const DefaultModel = "Qwen/Qwen3-0.6B"

// Sim defaults for what a real vLLM derives from the GPU and the model's
// config: a 32K context and a 131,072-token KV pool at
// --gpu-memory-utilization 0.9.
const (
	defaultMaxModelLen = 32768
	defaultKVTokens    = 131072
	defaultGPUMemUtil  = 0.9
)

// config is the parsed `vllm serve` command line.
type config struct {
	model       string
	servedNames []string
	host        string
	port        int

	maxModelLen   int
	maxNumSeqs    int
	blockSize     int
	prefixCaching bool
	gpuMemUtil    float64
	blocksOverr   int
	tp            int

	requestIDHeaders   bool
	promptTokensDetail bool
	forceIncludeUsage  bool
	serverLoadTracking bool
	disableLogStats    bool
	disableAccessLog   bool
	uvicornLogLevel    string
	apiKeys            []string

	kvTransferConfig string
	// maxNSequences is VLLM_MAX_N_SEQUENCES (vllm/envs.py, default 16384):
	// the largest n a request may ask for. Read from the environment.
	maxNSequences  int
	kvEventsConfig string

	nonDefault []string // "'key': value" pairs for the non-default args log line
}

// servedName is the first --served-model-name (the metrics' model_name).
func (c *config) servedName() string { return c.servedNames[0] }

// kvBlocks is the number of GPU KV blocks: --num-gpu-blocks-override, else
// the sim's pool scaled by --gpu-memory-utilization.
func (c *config) kvBlocks() int {
	if c.blocksOverr > 0 {
		return c.blocksOverr
	}
	return max(int(float64(defaultKVTokens)*c.gpuMemUtil/defaultGPUMemUtil)/c.blockSize, 1)
}

func boolOpt(flags ...string) *ap.Option  { return &ap.Option{Flags: flags, Action: ap.BoolOptional} }
func trueOpt(flags ...string) *ap.Option  { return &ap.Option{Flags: flags, Action: ap.StoreTrue} }
func valOpt(flags ...string) *ap.Option   { return &ap.Option{Flags: flags} }
func intOpt(flags ...string) *ap.Option   { return &ap.Option{Flags: flags, Check: ap.Int} }
func floatOpt(flags ...string) *ap.Option { return &ap.Option{Flags: flags, Check: ap.Float} }
func humanOpt(flags ...string) *ap.Option {
	return &ap.Option{Flags: flags, Check: ap.CheckHumanInt}
}
func jsonOpt(flags ...string) *ap.Option { return &ap.Option{Flags: flags, Check: ap.JSON} }
func listOpt(flags ...string) *ap.Option { return &ap.Option{Flags: flags, Nargs: ap.OneOrMore} }
func choiceOpt(choices []string, flags ...string) *ap.Option {
	return &ap.Option{Flags: flags, Choices: choices}
}

// serveOptions are the `vllm serve` options the sim knows. The sim honours
// the ones that shape serving (ports, names, lengths, scheduling, caching,
// API behaviour) and accepts the rest as a real server would, with their
// types checked, since they only tune GPU execution.
func serveOptions() []*ap.Option {
	return []*ap.Option{
		// Frontend
		valOpt("--host"), intOpt("--port"), valOpt("--uds"),
		choiceOpt([]string{"debug", "info", "warning", "error", "critical", "trace"}, "--uvicorn-log-level"),
		boolOpt("--disable-uvicorn-access-log"), boolOpt("--allow-credentials"),
		jsonOpt("--allowed-origins"), jsonOpt("--allowed-methods"), jsonOpt("--allowed-headers"),
		listOpt("--api-key"), listOpt("--lora-modules"), valOpt("--chat-template"),
		choiceOpt([]string{"auto", "string", "openai"}, "--chat-template-content-format"),
		boolOpt("--trust-request-chat-template"), valOpt("--response-role"),
		valOpt("--ssl-keyfile"), valOpt("--ssl-certfile"), valOpt("--ssl-ca-certs"), boolOpt("--enable-ssl-refresh"),
		intOpt("--ssl-cert-reqs"), valOpt("--root-path"), &ap.Option{Flags: []string{"--middleware"}, Action: ap.Append},
		boolOpt("--return-tokens-as-token-ids"), boolOpt("--disable-frontend-multiprocessing"),
		boolOpt("--enable-request-id-headers"), boolOpt("--enable-auto-tool-choice"),
		boolOpt("--exclude-tools-when-tool-choice-none"), valOpt("--tool-call-parser"), valOpt("--tool-parser-plugin"),
		valOpt("--tool-server"), valOpt("--log-config-file"), intOpt("--max-log-len"), boolOpt("--disable-fastapi-docs"),
		boolOpt("--enable-prompt-tokens-details"), boolOpt("--enable-server-load-tracking"),
		boolOpt("--enable-force-include-usage"), boolOpt("--enable-tokenizer-info-endpoint"), boolOpt("--enable-log-outputs"),
		intOpt("--h11-max-incomplete-event-size"), intOpt("--h11-max-header-count"), boolOpt("--log-error-stack"),
		intOpt("--api-server-count", "-asc"), valOpt("--config"), boolOpt("--headless"),
		intOpt("--data-parallel-start-rank", "-dpr"), boolOpt("--grpc"),
		boolOpt("--enable-log-requests"), boolOpt("--disable-log-requests"), boolOpt("--disable-log-stats"),
		boolOpt("--aggregate-engine-logging"), boolOpt("--enable-offline-docs"), boolOpt("--tokens-only"),
		// Model
		valOpt("--model"), choiceOpt([]string{"auto", "draft", "generate", "pooling"}, "--runner"),
		valOpt("--convert"), valOpt("--tokenizer"), valOpt("--tokenizer-mode"), boolOpt("--trust-remote-code"),
		valOpt("--dtype"), intOpt("--seed"), valOpt("--hf-config-path"), valOpt("--allowed-local-media-path"),
		listOpt("--allowed-media-domains"), valOpt("--revision"), valOpt("--code-revision"),
		valOpt("--tokenizer-revision"), humanOpt("--max-model-len"), valOpt("--quantization", "-q"),
		boolOpt("--enforce-eager"), intOpt("--max-logprobs"), valOpt("--logprobs-mode"),
		boolOpt("--disable-sliding-window"), boolOpt("--disable-cascade-attn"), boolOpt("--skip-tokenizer-init"),
		boolOpt("--enable-prompt-embeds"), listOpt("--served-model-name"), valOpt("--config-format"),
		valOpt("--hf-token"), jsonOpt("--hf-overrides"), jsonOpt("--pooler-config"), valOpt("--logits-processor-pattern"),
		valOpt("--generation-config"), jsonOpt("--override-generation-config"), boolOpt("--enable-sleep-mode"),
		valOpt("--model-impl"), valOpt("--override-attention-dtype"), listOpt("--logits-processors"),
		valOpt("--io-processor-plugin"), valOpt("--reasoning-parser"), valOpt("--reasoning-parser-plugin"),
		// Load
		valOpt("--load-format"), valOpt("--download-dir"), valOpt("--safetensors-load-strategy"),
		jsonOpt("--model-loader-extra-config"), listOpt("--ignore-patterns"), boolOpt("--use-tqdm-on-load"),
		valOpt("--pt-load-map-location"),
		// Parallel
		valOpt("--distributed-executor-backend"), intOpt("--pipeline-parallel-size", "-pp"),
		intOpt("--tensor-parallel-size", "-tp"), intOpt("--decode-context-parallel-size", "-dcp"),
		intOpt("--data-parallel-size", "-dp"), intOpt("--data-parallel-rank", "-dpn"),
		intOpt("--data-parallel-size-local", "-dpl"), valOpt("--data-parallel-address", "-dpa"),
		intOpt("--data-parallel-rpc-port", "-dpp"), valOpt("--data-parallel-backend", "-dpb"),
		boolOpt("--data-parallel-hybrid-lb", "-dph"), boolOpt("--data-parallel-external-lb", "-dpe"),
		boolOpt("--enable-expert-parallel", "-ep"), boolOpt("--enable-eplb"), jsonOpt("--eplb-config"),
		valOpt("--expert-placement-strategy"), valOpt("--all2all-backend"), intOpt("--max-parallel-loading-workers"),
		boolOpt("--ray-workers-use-nsight"), boolOpt("--disable-custom-all-reduce"), valOpt("--worker-cls"),
		valOpt("--worker-extension-cls"), boolOpt("--enable-dbo"), intOpt("--nnodes", "-n"), intOpt("--node-rank", "-r"),
		valOpt("--master-addr"), intOpt("--master-port"), boolOpt("--enable-multimodal-encoder-data-parallel"),
		// Cache
		intOpt("--block-size"), floatOpt("--gpu-memory-utilization"), humanOpt("--kv-cache-memory-bytes"),
		floatOpt("--swap-space"), valOpt("--kv-cache-dtype"), intOpt("--num-gpu-blocks-override"),
		boolOpt("--enable-prefix-caching"), choiceOpt([]string{"sha256", "sha256_cbor", "xxhash", "xxhash_cbor"}, "--prefix-caching-hash-algo"),
		floatOpt("--cpu-offload-gb"), boolOpt("--calculate-kv-scales"), boolOpt("--kv-sharing-fast-prefill"),
		valOpt("--mamba-cache-dtype"), valOpt("--mamba-ssm-cache-dtype"), floatOpt("--kv-offloading-size"),
		valOpt("--kv-offloading-backend"),
		// Multimodal
		jsonOpt("--limit-mm-per-prompt"), jsonOpt("--media-io-kwargs"), jsonOpt("--mm-processor-kwargs"),
		floatOpt("--mm-processor-cache-gb"), valOpt("--mm-processor-cache-type"), valOpt("--mm-encoder-tp-mode"),
		boolOpt("--interleave-mm-strings"), boolOpt("--skip-mm-profiling"), floatOpt("--video-pruning-rate"),
		// LoRA
		boolOpt("--enable-lora"), boolOpt("--enable-lora-bias"), intOpt("--max-loras"), intOpt("--max-lora-rank"),
		valOpt("--lora-dtype"), intOpt("--max-cpu-loras"), boolOpt("--fully-sharded-loras"), jsonOpt("--default-mm-loras"),
		// Observability
		valOpt("--show-hidden-metrics-for-version"), valOpt("--otlp-traces-endpoint"),
		listOpt("--collect-detailed-traces"), boolOpt("--kv-cache-metrics"), floatOpt("--kv-cache-metrics-sample"),
		boolOpt("--cudagraph-metrics"), boolOpt("--enable-layerwise-nvtx-tracing"), boolOpt("--enable-mfu-metrics"),
		jsonOpt("--custom-histogram-buckets"),
		// Scheduler
		humanOpt("--max-num-batched-tokens"), intOpt("--max-num-seqs"), intOpt("--max-num-partial-prefills"),
		intOpt("--max-long-partial-prefills"), intOpt("--long-prefill-token-threshold"),
		choiceOpt([]string{"fcfs", "priority"}, "--scheduling-policy"), boolOpt("--enable-chunked-prefill"),
		boolOpt("--disable-chunked-mm-input"), valOpt("--scheduler-cls"), boolOpt("--disable-hybrid-kv-cache-manager"),
		boolOpt("--async-scheduling"), intOpt("--stream-interval"),
		// Compilation and the vLLM config groups
		jsonOpt("--compilation-config", "-cc"), valOpt("--optimization-level"), listOpt("--cuda-graph-sizes"),
		jsonOpt("--speculative-config"), jsonOpt("--kv-transfer-config"), jsonOpt("--kv-events-config"),
		jsonOpt("--ec-transfer-config"), jsonOpt("--additional-config"), jsonOpt("--structured-outputs-config"),
		jsonOpt("--profiler-config"), jsonOpt("--attention-config"),
	}
}

// parser is the `vllm serve` subparser.
func serveParser() *ap.Parser {
	return &ap.Parser{
		Prog:        "vllm serve",
		Usage:       "vllm serve [model_tag] [options]",
		Positionals: []*ap.Positional{{Name: "model_tag", Nargs: ap.Optional}},
		Options:     serveOptions(),
	}
}

// topUsage is the `vllm` parser's usage, which argparse prints for an
// "unrecognized arguments" error (raised by the top-level parser, not the
// serve subparser).
const topUsage = "vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."

var subcommands = []string{"chat", "complete", "serve", "bench", "collect-env", "run-batch"}

var underscoreFlag = regexp.MustCompile(`^--[^=.]*`)

// normalize applies FlexibleArgumentParser's rewrites: underscores in option
// names become dashes, "--model X" moves to the positional, "-O3" becomes
// "--optimization-level 3".
func normalize(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "--"):
			out = append(out, underscoreFlag.ReplaceAllStringFunc(a, func(s string) string { return strings.ReplaceAll(s, "_", "-") }))
		case strings.HasPrefix(a, "-O") && a != "-O":
			v := strings.TrimPrefix(strings.TrimPrefix(a, "-O"), "=")
			out = append(out, "--optimization-level", v)
		case a == "-O" && i+1 < len(args) && strings.Contains("0123", args[i+1]) && len(args[i+1]) == 1:
			out = append(out, "--optimization-level")
		default:
			out = append(out, a)
		}
	}
	// vllm serve --model X ... => vllm serve X ...
	for i, a := range out {
		if a == "--model" && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			rest := append(append([]string{}, out[:i]...), out[i+2:]...)
			return append([]string{out[i+1]}, rest...)
		}
		if strings.HasPrefix(a, "--model=") {
			rest := append(append([]string{}, out[:i]...), out[i+1:]...)
			return append([]string{strings.TrimPrefix(a, "--model=")}, rest...)
		}
	}
	return out
}

// parseArgs turns argv (after "vllm") into a config, or an *ap.Help (help
// and version text) or *ap.Error (usage error) for server.ArgsExit.
func parseArgs(argv []string) (*config, error) {
	top := &ap.Parser{Prog: "vllm", Usage: topUsage}
	if len(argv) == 0 {
		return nil, &ap.Help{Text: "usage: " + topUsage + "\n\nvLLM CLI\n"}
	}
	switch argv[0] {
	case "-h", "--help":
		return nil, &ap.Help{Text: "usage: " + topUsage + "\n\nvLLM CLI\n"}
	case "-v", "--version":
		return nil, &ap.Help{Text: Version + "\n"}
	case "serve":
	default:
		q := make([]string, len(subcommands))
		for i, s := range subcommands {
			q[i] = "'" + s + "'"
		}
		if strings.HasPrefix(argv[0], "-") {
			return nil, top.Errorf("unrecognized arguments: %s", strings.Join(argv, " "))
		}
		return nil, top.Errorf("argument subparser: invalid choice: '%s' (choose from %s)", argv[0], strings.Join(q, ", "))
	}
	p := serveParser()
	args := normalize(argv[1:])
	r, extras, err := p.ParseKnown(args)
	if err != nil {
		return nil, err // *ap.Help or *ap.Error
	}
	if len(extras) > 0 {
		return nil, top.Errorf("unrecognized arguments: %s", strings.Join(extras, " "))
	}
	c := &config{
		model:              r.Positional("model_tag", DefaultModel),
		host:               r.String("host", ""),
		port:               r.IntValue("port", 8000),
		maxModelLen:        r.IntValue("max_model_len", defaultMaxModelLen),
		maxNumSeqs:         r.IntValue("max_num_seqs", 256),
		blockSize:          r.IntValue("block_size", 16),
		prefixCaching:      r.Bool("enable_prefix_caching", true),
		gpuMemUtil:         r.FloatValue("gpu_memory_utilization", defaultGPUMemUtil),
		blocksOverr:        r.IntValue("num_gpu_blocks_override", 0),
		tp:                 r.IntValue("tensor_parallel_size", 1),
		requestIDHeaders:   r.Bool("enable_request_id_headers", false),
		promptTokensDetail: r.Bool("enable_prompt_tokens_details", false),
		forceIncludeUsage:  r.Bool("enable_force_include_usage", false),
		serverLoadTracking: r.Bool("enable_server_load_tracking", false),
		disableLogStats:    r.Bool("disable_log_stats", false),
		disableAccessLog:   r.Bool("disable_uvicorn_access_log", false),
		uvicornLogLevel:    r.String("uvicorn_log_level", "info"),
		apiKeys:            r.Strings("api_key"),
		kvTransferConfig:   r.String("kv_transfer_config", ""),
		kvEventsConfig:     r.String("kv_events_config", ""),
	}
	c.servedNames = r.Strings("served_model_name")
	if len(c.servedNames) == 0 {
		c.servedNames = []string{c.model}
	}
	// Values the real parser accepts but the engine refuses at start-up.
	switch {
	case c.maxNumSeqs < 1:
		return nil, p.Errorf("argument --max-num-seqs: max_num_seqs must be at least 1, got %d", c.maxNumSeqs)
	case c.blockSize < 1:
		return nil, p.Errorf("argument --block-size: block_size must be at least 1, got %d", c.blockSize)
	case c.maxModelLen < 1:
		return nil, p.Errorf("argument --max-model-len: max_model_len must be at least 1, got %d", c.maxModelLen)
	case c.gpuMemUtil <= 0 || c.gpuMemUtil > 1:
		return nil, p.Errorf("argument --gpu-memory-utilization: gpu_memory_utilization must be in (0, 1], got %v", c.gpuMemUtil)
	}
	c.nonDefault = nonDefaultArgs(r, p, c)
	return c, nil
}

// nonDefaultArgs renders the options given on the command line the way
// vLLM's "non-default args: {...}" log line shows them.
func nonDefaultArgs(r *ap.Result, p *ap.Parser, c *config) []string {
	out := []string{fmt.Sprintf("'model_tag': %s", pyrepr.Str(c.model))}
	seen := map[string]bool{}
	for _, o := range p.Options {
		if !r.Has(o.Dest) || seen[o.Dest] {
			continue
		}
		seen[o.Dest] = true
		var v string
		switch o.Action {
		case ap.BoolOptional, ap.StoreTrue:
			v = pyrepr.Bool(r.Bool(o.Dest, false))
		default:
			if o.Nargs == ap.OneOrMore {
				vs := r.Strings(o.Dest)
				q := make([]string, len(vs))
				for i, s := range vs {
					q[i] = pyrepr.Str(s)
				}
				v = "[" + strings.Join(q, ", ") + "]"
			} else {
				s := r.String(o.Dest, "")
				if _, err := strconv.Atoi(s); err == nil {
					v = s
				} else {
					v = pyrepr.Str(s)
				}
			}
		}
		out = append(out, fmt.Sprintf("%s: %s", pyrepr.Str(o.Dest), v))
	}
	out = append(out, fmt.Sprintf("'model': %s", pyrepr.Str(c.model)))
	return out
}
