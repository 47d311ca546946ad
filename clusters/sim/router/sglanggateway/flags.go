package sglanggateway

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/router/clap"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rustfmt"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// binName is the container command (argv[0]), which clap puts in its usage.
const binName = "sgl-model-gateway"

// Version is the emulated release (gateway-v0.3.1).
const Version = "0.3.1"

func def(long string, t clap.ValueType, v string) clap.Arg {
	return clap.Arg{Long: long, Type: t, Default: v, HasDefault: true}
}

func opt(long string, t clap.ValueType) clap.Arg { return clap.Arg{Long: long, Type: t} }

func flag(long string) clap.Arg { return clap.Arg{Long: long, Action: clap.SetTrue} }

func many(long string) clap.Arg { return clap.Arg{Long: long, Action: clap.AppendMany} }

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
		Args: []clap.Arg{
			def("host", clap.String, "0.0.0.0"),
			def("port", clap.U16, "30000"),
			many("worker-urls"),
			{Long: "policy", Default: policy.CacheAware, HasDefault: true, Possible: policies},
			def("cache-threshold", clap.F32, "0.3"),
			def("balance-abs-threshold", clap.Usize, "64"),
			def("balance-rel-threshold", clap.F32, "1.5"),
			def("eviction-interval", clap.U64, "120"),
			def("max-tree-size", clap.Usize, "67108864"),
			def("max-idle-secs", clap.U64, "14400"),
			def("prefix-token-count", clap.Usize, "256"),
			def("prefix-hash-load-factor", clap.F64, "1.25"),
			flag("dp-aware"),
			flag("enable-igw"),
			flag("pd-disaggregation"),
			{Long: "decode", Action: clap.Append},
			{Long: "prefill-policy", Possible: policies},
			{Long: "decode-policy", Possible: policies},
			def("worker-startup-timeout-secs", clap.U64, "1800"),
			def("worker-startup-check-interval", clap.U64, "30"),
			flag("service-discovery"),
			many("selector"),
			def("service-discovery-port", clap.U16, "80"),
			opt("service-discovery-namespace", clap.String),
			many("prefill-selector"),
			many("decode-selector"),
			opt("log-dir", clap.String),
			{Long: "log-level", Default: "info", HasDefault: true, Possible: []string{"debug", "info", "warn", "error"}},
			def("prometheus-port", clap.U16, "29000"),
			def("prometheus-host", clap.String, "0.0.0.0"),
			{Long: "prometheus-duration-buckets", Action: clap.AppendMany, Type: clap.F64},
			many("request-id-headers"),
			def("request-timeout-secs", clap.U64, "1800"),
			def("shutdown-grace-period-secs", clap.U64, "180"),
			def("max-payload-size", clap.Usize, "536870912"),
			many("cors-allowed-origins"),
			def("max-concurrent-requests", clap.I32, "-1"),
			def("queue-size", clap.Usize, "100"),
			def("queue-timeout-secs", clap.U64, "60"),
			opt("rate-limit-tokens-per-second", clap.I32),
			def("retry-max-retries", clap.U32, "5"),
			def("retry-initial-backoff-ms", clap.U64, "50"),
			def("retry-max-backoff-ms", clap.U64, "30000"),
			def("retry-backoff-multiplier", clap.F32, "1.5"),
			def("retry-jitter-factor", clap.F32, "0.2"),
			flag("disable-retries"),
			def("cb-failure-threshold", clap.U32, "10"),
			def("cb-success-threshold", clap.U32, "3"),
			def("cb-timeout-duration-secs", clap.U64, "60"),
			def("cb-window-duration-secs", clap.U64, "120"),
			flag("disable-circuit-breaker"),
			def("health-failure-threshold", clap.U32, "3"),
			def("health-success-threshold", clap.U32, "2"),
			def("health-check-timeout-secs", clap.U64, "5"),
			def("health-check-interval-secs", clap.U64, "60"),
			def("health-check-endpoint", clap.String, "/health"),
			opt("model-path", clap.String),
			opt("tokenizer-path", clap.String),
			opt("chat-template", clap.String),
			flag("tokenizer-cache-enable-l0"),
			def("tokenizer-cache-l0-max-entries", clap.Usize, "10000"),
			flag("tokenizer-cache-enable-l1"),
			def("tokenizer-cache-l1-max-memory", clap.Usize, "52428800"),
			opt("reasoning-parser", clap.String),
			opt("tool-call-parser", clap.String),
			opt("mcp-config-path", clap.String),
			{Long: "backend", Default: "sglang", HasDefault: true, Possible: []string{"sglang", "vllm", "trtllm", "openai", "anthropic"}, Aliases: []string{"runtime"}},
			{Long: "history-backend", Default: "memory", HasDefault: true, Possible: []string{"memory", "none", "oracle", "postgres"}},
			flag("enable-wasm"),
			opt("oracle-wallet-path", clap.String),
			opt("oracle-tns-alias", clap.String),
			opt("oracle-dsn", clap.String),
			opt("oracle-user", clap.String),
			opt("oracle-password", clap.String),
			opt("oracle-pool-min", clap.Usize),
			opt("oracle-pool-max", clap.Usize),
			opt("oracle-pool-timeout-secs", clap.U64),
			opt("postgres-db-url", clap.String),
			opt("postgres-pool-max-size", clap.Usize),
			opt("tls-cert-path", clap.String),
			opt("tls-key-path", clap.String),
			flag("enable-trace"),
			def("otlp-traces-endpoint", clap.String, "localhost:4317"),
			opt("api-key", clap.String),
			opt("jwt-issuer", clap.String),
			opt("jwt-audience", clap.String),
			opt("jwt-jwks-uri", clap.String),
			def("jwt-role-claim", clap.String, "roles"),
			{Long: "jwt-role-mapping", Action: clap.Append},
			{Long: "control-plane-api-keys", Action: clap.Append},
			flag("disable-audit-logging"),
		},
	}
}

// prefillArg is one hand-parsed `--prefill URL [PORT|none]`.
type prefillArg struct {
	url  string
	port *int
}

// splitPrefill is main's parse_prefill_args plus the filter that drops
// `--prefill URL [PORT|none]` before clap.
func splitPrefill(args []string) ([]prefillArg, []string) {
	var pre []prefillArg
	var other []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--prefill" && i+1 < len(args) {
			p := prefillArg{url: args[i+1]}
			i++
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				var n int
				if _, err := fmt.Sscanf(args[i+1], "%d", &n); err == nil && fmt.Sprint(n) == args[i+1] && n >= 0 && n <= 65535 {
					p.port = &n
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

// config is the parsed CLI.
type config struct {
	m               *clap.Matches
	host            string
	port            uint64
	workerURLs      []string
	policy          string
	pd              bool
	decode          []string
	prefill         []prefillArg
	prefillPolicy   *string
	decodePolicy    *string
	policyCfg       policy.Config
	maxPayload      uint64
	backend         string
	logLevel        string
	serviceDisc     bool
	selector        map[string]string
	prefillSel      map[string]string
	decodeSel       map[string]string
	sdPort          uint64
	sdNamespace     string
	promHost        string
	promPort        uint64
	requestIDs      []string
	requestTimeout  uint64
	enableIGW       bool
	startupTimeout  uint64
	startupInterval uint64
}

func optional(m *clap.Matches, long string) *string {
	if v, ok := m.Optional(long); ok {
		return &v
	}
	return nil
}

func newConfig(m *clap.Matches, prefill []prefillArg) *config {
	c := &config{
		m:               m,
		host:            m.Value("host"),
		port:            m.Uint("port"),
		workerURLs:      m.Values("worker-urls"),
		policy:          m.Value("policy"),
		pd:              m.Bool("pd-disaggregation"),
		decode:          m.Values("decode"),
		prefill:         prefill,
		prefillPolicy:   optional(m, "prefill-policy"),
		decodePolicy:    optional(m, "decode-policy"),
		maxPayload:      m.Uint("max-payload-size"),
		backend:         m.Value("backend"),
		logLevel:        m.Value("log-level"),
		serviceDisc:     m.Bool("service-discovery"),
		selector:        discovery.ParseSelector(m.Values("selector")),
		prefillSel:      discovery.ParseSelector(m.Values("prefill-selector")),
		decodeSel:       discovery.ParseSelector(m.Values("decode-selector")),
		sdPort:          m.Uint("service-discovery-port"),
		promHost:        m.Value("prometheus-host"),
		promPort:        m.Uint("prometheus-port"),
		requestIDs:      m.Values("request-id-headers"),
		requestTimeout:  m.Uint("request-timeout-secs"),
		enableIGW:       m.Bool("enable-igw"),
		startupTimeout:  m.Uint("worker-startup-timeout-secs"),
		startupInterval: m.Uint("worker-startup-check-interval"),
	}
	if ns, ok := m.Optional("service-discovery-namespace"); ok {
		c.sdNamespace = ns
	}
	pc := policy.DefaultConfig()
	pc.CacheThreshold = m.Float32("cache-threshold")
	pc.BalanceAbsThreshold = int64(min(m.Uint("balance-abs-threshold"), 1<<62))
	pc.BalanceRelThreshold = m.Float32("balance-rel-threshold")
	pc.EvictionInterval = secs(m.Uint("eviction-interval"))
	pc.MaxTreeSize = int(min(m.Uint("max-tree-size"), 1<<62))
	pc.MaxIdle = secs(m.Uint("max-idle-secs"))
	pc.PrefixTokenCount = int(min(m.Uint("prefix-token-count"), 1<<30))
	pc.PrefixHashLoadFactor = float32(m.Float("prefix-hash-load-factor"))
	c.policyCfg = pc
	return c
}

// policyDebug is `{:?}` of SG's PolicyConfig for name.
func (c *config) policyDebug(name string) string {
	switch name {
	case policy.Random:
		return "Random"
	case policy.RoundRobin:
		return "RoundRobin"
	case policy.CacheAware:
		return fmt.Sprintf("CacheAware { cache_threshold: %s, balance_abs_threshold: %d, balance_rel_threshold: %s, eviction_interval_secs: %d, max_tree_size: %d }",
			rustfmt.F32(c.m.Float32("cache-threshold")), c.m.Uint("balance-abs-threshold"),
			rustfmt.F32(c.m.Float32("balance-rel-threshold")), c.m.Uint("eviction-interval"), c.m.Uint("max-tree-size"))
	case policy.PowerOfTwo:
		return "PowerOfTwo { load_check_interval_secs: 5 }"
	case policy.PrefixHash:
		return fmt.Sprintf("PrefixHash { prefix_token_count: %d, load_factor: %s }", c.m.Uint("prefix-token-count"), rustfmt.Float(c.m.Float("prefix-hash-load-factor"), 64))
	case policy.Manual:
		return fmt.Sprintf("Manual { eviction_interval_secs: %d, max_idle_secs: %d }", c.m.Uint("eviction-interval"), c.m.Uint("max-idle-secs"))
	}
	return "RoundRobin"
}

func (c *config) optPolicyDebug(p *string) string {
	if p == nil {
		return "None"
	}
	return "Some(" + c.policyDebug(*p) + ")"
}

// modeDebug is `{:?}` of RoutingMode (IGW does not change it).
func (c *config) modeDebug() string {
	switch {
	case c.backend == "openai":
		return "OpenAI { worker_urls: " + rustfmt.StrVec(c.workerURLs) + " }"
	case c.pd:
		pre := make([]string, len(c.prefill))
		for i, p := range c.prefill {
			port := "None"
			if p.port != nil {
				port = fmt.Sprintf("Some(%d)", *p.port)
			}
			pre[i] = "(" + rustfmt.Str(p.url) + ", " + port + ")"
		}
		return "PrefillDecode { prefill_urls: " + rustfmt.Vec(pre) + ", decode_urls: " + rustfmt.StrVec(c.decode) +
			", prefill_policy: " + c.optPolicyDebug(c.prefillPolicy) + ", decode_policy: " + c.optPolicyDebug(c.decodePolicy) + " }"
	default:
		return "Regular { worker_urls: " + rustfmt.StrVec(c.workerURLs) + " }"
	}
}

// modeLine is main's "Mode: …" println.
func (c *config) modeLine() string {
	switch {
	case c.enableIGW:
		return "IGW (Inference Gateway)"
	case c.backend == "openai":
		return "OpenAI Backend"
	case c.pd:
		return "PD Disaggregated"
	default:
		return "Regular (" + c.backend + ")"
	}
}

// validate is RouterConfig::validate's policy checks; the text is main's
// `Error: {:?}` of ConfigError.
func (c *config) validate() error {
	for _, p := range []string{c.policy, deref(c.prefillPolicy), deref(c.decodePolicy)} {
		if p != policy.CacheAware {
			continue
		}
		ct := c.m.Float32("cache-threshold")
		if ct < 0 || ct > 1 {
			return invalidValue("cache_threshold", rustDisplayF32(ct), "Must be between 0.0 and 1.0")
		}
		if br := c.m.Float32("balance-rel-threshold"); br < 1 {
			return invalidValue("balance_rel_threshold", rustDisplayF32(br), "Must be >= 1.0")
		}
		if c.m.Uint("eviction-interval") == 0 {
			return invalidValue("eviction_interval_secs", "0", "Must be > 0")
		}
		if c.m.Uint("max-tree-size") == 0 {
			return invalidValue("max_tree_size", "0", "Must be > 0")
		}
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func invalidValue(field, value, reason string) error {
	return fmt.Errorf("InvalidValue { field: %s, value: %s, reason: %s }", rustfmt.Str(field), rustfmt.Str(value), rustfmt.Str(reason))
}

func rustDisplayF32(f float32) string { return strings.TrimSuffix(rustfmt.F32(f), ".0") }
