package vllmrouter

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/cli"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/clap"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/debug"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// binName is the container command (argv[0]), which clap puts in its usage.
const binName = "vllm-router"

// Version is the emulated release.
const Version = "0.1.15"

// command is vllm-router's CliArgs (src/main.rs), field by field in
// declaration order (clap's keymap order decides suggestion ties).
func command() *clap.Command {
	policies := policy.Names(policy.FlavorVR)
	return &clap.Command{
		BinName: binName,
		About:   "VLLM Router - High-performance request distribution across worker nodes",
		Version: Version,
		Args: slices.Concat([]clap.Arg{
			cli.Def("host", clap.String, "127.0.0.1"),
			cli.Def("port", clap.U16, "30000"),
			cli.Many("worker-urls"),
			{Long: "policy", Default: policy.CacheAware, HasDefault: true, Possible: policies},
			cli.Flag("vllm-pd-disaggregation"),
			cli.Opt("vllm-discovery-address", clap.String),
			{Long: "decode", Action: clap.Append},
			{Long: "prefill-policy", Possible: policies},
			{Long: "decode-policy", Possible: policies},
			cli.Def("worker-startup-timeout-secs", clap.U64, "600"),
			cli.Def("worker-startup-check-interval", clap.U64, "30"),
		}, cli.CacheAwareArgs(), []clap.Arg{
			cli.Def("max-payload-size", clap.Usize, "536870912"),
			cli.Def("intra-node-data-parallel-size", clap.Usize, "1"),
			cli.Opt("api-key", clap.String),
			cli.Many("api-key-validation-urls"),
			{Long: "backend", Default: "vllm", HasDefault: true, Possible: []string{"vllm", "trtllm", "openai", "anthropic"}, Aliases: []string{"runtime"}},
			cli.Opt("log-dir", clap.String),
			{Long: "log-level", Default: "info", HasDefault: true, Possible: []string{"debug", "info", "warn", "error"}},
			cli.Flag("enable-trace"),
			cli.Opt("otlp-traces-endpoint", clap.String),
			cli.Def("otel-sampling-ratio", clap.F64, "1.0"),
			cli.Many("otel-excluded-paths"),
		}, cli.DiscoveryArgs(), []clap.Arg{
			cli.Def("prometheus-port", clap.U16, "29000"),
			cli.Def("prometheus-host", clap.String, "127.0.0.1"),
			cli.Many("request-id-headers"),
			cli.Def("request-timeout-secs", clap.U64, "1800"),
			cli.Def("max-concurrent-requests", clap.Usize, "32768"),
			cli.Many("cors-allowed-origins"),
		}, cli.ResilienceArgs(), []clap.Arg{
			cli.Flag("enable-igw"),
			{Long: "history-backend", Default: "memory", HasDefault: true, Possible: []string{"memory", "none"}},
			cli.Flag("profile"),
			{Long: "kv-connector", Default: "nixl", HasDefault: true, Possible: []string{"nixl", "mooncake", "moriio"}},
		}),
	}
}

// splitPrefill is main.rs's split_prefill_args_from_others: `--prefill` and
// its URL and optional port are taken out before clap sees the argv.
func splitPrefill(args []string) ([]cli.PrefillArg, []string, error) {
	var pre []cli.PrefillArg
	var other []string
	for i := 0; i < len(args); i++ {
		if args[i] != "--prefill" {
			other = append(other, args[i])
			continue
		}
		if i+1 >= len(args) {
			return nil, nil, fmt.Errorf("--prefill requires a URL immediately after")
		}
		url := args[i+1]
		i++
		if strings.HasPrefix(url, "-") {
			return nil, nil, fmt.Errorf("Invalid url %s", url)
		}
		p := cli.PrefillArg{URL: url}
		if i+1 < len(args) {
			nxt := args[i+1]
			switch {
			case strings.EqualFold(nxt, "none"):
				i++
			case !strings.HasPrefix(nxt, "-"):
				var n int
				if _, err := fmt.Sscanf(nxt, "%d", &n); err == nil && fmt.Sprint(n) == nxt && n >= 0 && n <= 65535 {
					p.Port = &n
					i++
				}
			}
		}
		pre = append(pre, p)
	}
	return pre, other, nil
}

// config is the parsed CLI: the flags both routers share, and VR's own.
type config struct {
	cli.Common
	policyCfg     policy.Config
	discoveryAddr *string
	kvConnector   string
}

func newConfig(m *clap.Matches, prefill []cli.PrefillArg) *config {
	c := &config{
		Common:        cli.NewCommon(m, "vllm-pd-disaggregation", prefill),
		discoveryAddr: cli.Optional(m, "vllm-discovery-address"),
		kvConnector:   m.Value("kv-connector"),
	}
	pc := policy.DefaultConfig()
	pc.CacheThreshold = m.Float32("cache-threshold")
	// SG clamps this at 1<<62; VR never did (a value past i64 wraps).
	pc.BalanceAbsThreshold = int64(m.Uint("balance-abs-threshold"))
	pc.BalanceRelThreshold = m.Float32("balance-rel-threshold")
	pc.EvictionInterval = cli.Secs(m.Uint("eviction-interval"))
	pc.MaxTreeSize = int(min(m.Uint("max-tree-size"), 1<<62))
	c.policyCfg = pc
	return c
}

// policyDebug is `{:?}` of VR's PolicyConfig for name: its own
// variants, then those both routers have.
func (c *config) policyDebug(name string) string {
	switch name {
	case policy.ConsistentHash:
		return "ConsistentHash { virtual_nodes: 160 }"
	case policy.RendezvousHash:
		return "RendezvousHash"
	}
	return c.CommonPolicyDebug(name)
}

// modeDebug is `{:?}` of RoutingMode as to_router_config builds it.
func (c *config) modeDebug() string {
	switch {
	case c.EnableIGW:
		return "Regular { worker_urls: [] }"
	case c.Backend == "openai":
		return "OpenAI { worker_urls: " + debug.StrVec(c.WorkerURLs) + " }"
	case c.PD:
		disc := "None"
		if c.discoveryAddr != nil {
			disc = "Some(" + debug.Str(*c.discoveryAddr) + ")"
		}
		return "VllmPrefillDecode { prefill_urls: " + cli.PrefillDebug(c.Prefill) + ", decode_urls: " + debug.StrVec(c.Decode) +
			", prefill_policy: " + debug.OptionWith(c.PrefillPolicy, c.policyDebug) + ", decode_policy: " + debug.OptionWith(c.DecodePolicy, c.policyDebug) +
			", discovery_address: " + disc + " }"
	default:
		return "Regular { worker_urls: " + debug.StrVec(c.WorkerURLs) + " }"
	}
}

// kvConnectorDebug is `{:?}` of KvConnector.
func (c *config) kvConnectorDebug() string {
	switch c.kvConnector {
	case "mooncake":
		return "Mooncake"
	case "moriio":
		return "MoriIO"
	default:
		return "Nixl"
	}
}

// validateMode is to_router_config's mode checks; the error text is main's
// `Error: {:?}` of ConfigError.
func (c *config) validateMode() error {
	if !c.EnableIGW && c.Backend != "openai" {
		if c.PD {
			static := len(c.Prefill) > 0 || len(c.Decode) > 0
			k8s := c.ServiceDiscovery && (len(c.PrefillSelector) > 0 || len(c.DecodeSelector) > 0)
			if !static && c.discoveryAddr == nil && !k8s {
				return fmt.Errorf("ValidationFailed { reason: %s }", debug.Str("vLLM PD disaggregation mode requires one of: --vllm-discovery-address, --prefill/--decode URLs, or --service-discovery with --prefill-selector/--decode-selector"))
			}
		} else if !c.ServiceDiscovery && len(c.WorkerURLs) == 0 {
			return fmt.Errorf("ValidationFailed { reason: %s }", debug.Str("Regular mode requires --worker-urls when not using service discovery"))
		}
	}
	return nil
}

// validateCompatibility is RouterConfig validation's validate_compatibility:
// without service discovery (Kubernetes, or vLLM's ZMQ discovery address)
// power_of_two needs two workers, in its pool too under P/D; MoRI-IO needs
// the ZMQ discovery whatever else is on. The error text is main's
// `Error: {:?}` of ConfigError, as the clap binary prints it
// (vllm-project/router@v0.1.15:src/config/validation.rs).
func (c *config) validateCompatibility() error {
	zmq := c.PD && c.discoveryAddr != nil
	incompatible := func(reason string) error {
		return fmt.Errorf("IncompatibleConfig { reason: %s }", debug.Str(reason))
	}
	if !c.ServiceDiscovery && !zmq {
		workers := 0
		switch {
		case c.EnableIGW:
		case c.Backend == "openai":
			workers = 1
		case c.PD:
			workers = len(c.Prefill) + len(c.Decode)
		default:
			workers = len(c.WorkerURLs)
		}
		if c.Policy == policy.PowerOfTwo && workers < 2 {
			return incompatible("Power-of-two policy requires at least 2 workers")
		}
		if c.PD && !c.EnableIGW && c.Backend != "openai" {
			if cli.Deref(c.PrefillPolicy) == policy.PowerOfTwo && len(c.Prefill) < 2 {
				return incompatible("Power-of-two policy for prefill requires at least 2 prefill workers")
			}
			if cli.Deref(c.DecodePolicy) == policy.PowerOfTwo && len(c.Decode) < 2 {
				return incompatible("Power-of-two policy for decode requires at least 2 decode workers")
			}
		}
	}
	if c.kvConnector == "moriio" && !zmq {
		return incompatible("MoRI-IO KV connector requires service discovery to be enabled (ZMQ addresses are obtained via instance registration). Please run with `--vllm-discovery-address ${address}`")
	}
	return nil
}
