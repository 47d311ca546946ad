package sglanggateway

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
const binName = "sgl-model-gateway"

// Version is the emulated release (gateway-v0.3.1).
const Version = "0.3.1"

// command is sgl-model-gateway's Cli (clap name sglang-router, aliases smg
// and amg): the flattened CliArgs in declaration order, plus the `launch`
// subcommand (visible alias `start`) and args_conflicts_with_subcommands.
func command() *clap.Command {
	policies := policy.Names(policy.FlavorSG)
	return &clap.Command{
		BinName:                      binName,
		About:                        "SGLang Model Gateway - High-performance inference gateway",
		Subcommands:                  []clap.Subcommand{{Name: "launch", Aliases: []string{"start"}, About: "Launch the router (same as running without subcommand)"}},
		ArgsConflictsWithSubcommands: true,
		Args: slices.Concat([]clap.Arg{
			cli.Def("host", clap.String, "0.0.0.0"),
			cli.Def("port", clap.U16, "30000"),
			cli.Many("worker-urls"),
			{Long: "policy", Default: policy.CacheAware, HasDefault: true, Possible: policies},
		}, cli.CacheAwareArgs(), []clap.Arg{
			cli.Def("max-idle-secs", clap.U64, "14400"),
			cli.Def("prefix-token-count", clap.Usize, "256"),
			cli.Def("prefix-hash-load-factor", clap.F64, "1.25"),
			cli.Flag("dp-aware"),
			cli.Flag("enable-igw"),
			cli.Flag("pd-disaggregation"),
			{Long: "decode", Action: clap.Append},
			{Long: "prefill-policy", Possible: policies},
			{Long: "decode-policy", Possible: policies},
			cli.Def("worker-startup-timeout-secs", clap.U64, "1800"),
			cli.Def("worker-startup-check-interval", clap.U64, "30"),
		}, cli.DiscoveryArgs(), []clap.Arg{
			cli.Opt("log-dir", clap.String),
			{Long: "log-level", Default: "info", HasDefault: true, Possible: []string{"debug", "info", "warn", "error"}},
			cli.Def("prometheus-port", clap.U16, "29000"),
			cli.Def("prometheus-host", clap.String, "0.0.0.0"),
			{Long: "prometheus-duration-buckets", Action: clap.AppendMany, Type: clap.F64},
			cli.Many("request-id-headers"),
			cli.Def("request-timeout-secs", clap.U64, "1800"),
			cli.Def("shutdown-grace-period-secs", clap.U64, "180"),
			cli.Def("max-payload-size", clap.Usize, "536870912"),
			cli.Many("cors-allowed-origins"),
			cli.Def("max-concurrent-requests", clap.I32, "-1"),
			cli.Def("queue-size", clap.Usize, "100"),
			cli.Def("queue-timeout-secs", clap.U64, "60"),
			cli.Opt("rate-limit-tokens-per-second", clap.I32),
		}, cli.ResilienceArgs(), []clap.Arg{
			cli.Opt("model-path", clap.String),
			cli.Opt("tokenizer-path", clap.String),
			cli.Opt("chat-template", clap.String),
			cli.Flag("tokenizer-cache-enable-l0"),
			cli.Def("tokenizer-cache-l0-max-entries", clap.Usize, "10000"),
			cli.Flag("tokenizer-cache-enable-l1"),
			cli.Def("tokenizer-cache-l1-max-memory", clap.Usize, "52428800"),
			cli.Opt("reasoning-parser", clap.String),
			cli.Opt("tool-call-parser", clap.String),
			cli.Opt("mcp-config-path", clap.String),
			{Long: "backend", Default: "sglang", HasDefault: true, Possible: []string{"sglang", "vllm", "trtllm", "openai", "anthropic"}, Aliases: []string{"runtime"}},
			{Long: "history-backend", Default: "memory", HasDefault: true, Possible: []string{"memory", "none", "oracle", "postgres"}},
			cli.Flag("enable-wasm"),
			cli.Opt("oracle-wallet-path", clap.String),
			cli.Opt("oracle-tns-alias", clap.String),
			cli.Opt("oracle-dsn", clap.String),
			cli.Opt("oracle-user", clap.String),
			cli.Opt("oracle-password", clap.String),
			cli.Opt("oracle-pool-min", clap.Usize),
			cli.Opt("oracle-pool-max", clap.Usize),
			cli.Opt("oracle-pool-timeout-secs", clap.U64),
			cli.Opt("postgres-db-url", clap.String),
			cli.Opt("postgres-pool-max-size", clap.Usize),
			cli.Opt("tls-cert-path", clap.String),
			cli.Opt("tls-key-path", clap.String),
			cli.Flag("enable-trace"),
			cli.Def("otlp-traces-endpoint", clap.String, "localhost:4317"),
			cli.Opt("api-key", clap.String),
			cli.Opt("jwt-issuer", clap.String),
			cli.Opt("jwt-audience", clap.String),
			cli.Opt("jwt-jwks-uri", clap.String),
			cli.Def("jwt-role-claim", clap.String, "roles"),
			{Long: "jwt-role-mapping", Action: clap.Append},
			{Long: "control-plane-api-keys", Action: clap.Append},
			cli.Flag("disable-audit-logging"),
		}),
	}
}

// splitPrefill is main's parse_prefill_args plus the filter that drops
// `--prefill URL [PORT|none]` before clap.
func splitPrefill(args []string) ([]cli.PrefillArg, []string) {
	var pre []cli.PrefillArg
	var other []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--prefill" && i+1 < len(args) {
			p := cli.PrefillArg{URL: args[i+1]}
			i++
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				var n int
				if _, err := fmt.Sscanf(args[i+1], "%d", &n); err == nil && fmt.Sprint(n) == args[i+1] && n >= 0 && n <= 65535 {
					p.Port = &n
					i++
				} else if strings.ToLower(args[i+1]) == "none" {
					i++
				}
			}
			pre = append(pre, p)
			continue
		}
		other = append(other, args[i])
	}
	return pre, other
}

// config is the parsed CLI: the flags both routers share, and SG's policy
// knobs.
type config struct {
	cli.Common
	policyCfg policy.Config
}

func newConfig(m *clap.Matches, prefill []cli.PrefillArg) *config {
	c := &config{Common: cli.NewCommon(m, "pd-disaggregation", prefill)}
	pc := policy.DefaultConfig()
	pc.CacheThreshold = m.Float32("cache-threshold")
	pc.BalanceAbsThreshold = int64(min(m.Uint("balance-abs-threshold"), 1<<62))
	pc.BalanceRelThreshold = m.Float32("balance-rel-threshold")
	pc.EvictionInterval = cli.Secs(m.Uint("eviction-interval"))
	pc.MaxTreeSize = int(min(m.Uint("max-tree-size"), 1<<62))
	pc.MaxIdle = cli.Secs(m.Uint("max-idle-secs"))
	pc.PrefixTokenCount = int(min(m.Uint("prefix-token-count"), 1<<30))
	pc.PrefixHashLoadFactor = float32(m.Float("prefix-hash-load-factor"))
	c.policyCfg = pc
	return c
}

// policyDebug is `{:?}` of SG's PolicyConfig for name: its own
// variants, then those both routers have.
func (c *config) policyDebug(name string) string {
	switch name {
	case policy.PrefixHash:
		return fmt.Sprintf("PrefixHash { prefix_token_count: %d, load_factor: %s }", c.Flags.Uint("prefix-token-count"), debug.Float(c.Flags.Float("prefix-hash-load-factor"), 64))
	case policy.Manual:
		return fmt.Sprintf("Manual { eviction_interval_secs: %d, max_idle_secs: %d }", c.Flags.Uint("eviction-interval"), c.Flags.Uint("max-idle-secs"))
	}
	return c.CommonPolicyDebug(name)
}

// modeDebug is `{:?}` of RoutingMode (IGW does not change it).
func (c *config) modeDebug() string {
	switch {
	case c.Backend == "openai":
		return "OpenAI { worker_urls: " + debug.StrVec(c.WorkerURLs) + " }"
	case c.PD:
		return "PrefillDecode { prefill_urls: " + cli.PrefillDebug(c.Prefill) + ", decode_urls: " + debug.StrVec(c.Decode) +
			", prefill_policy: " + debug.OptionWith(c.PrefillPolicy, c.policyDebug) + ", decode_policy: " + debug.OptionWith(c.DecodePolicy, c.policyDebug) + " }"
	default:
		return "Regular { worker_urls: " + debug.StrVec(c.WorkerURLs) + " }"
	}
}
