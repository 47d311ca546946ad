package vllmrouter

import (
	"fmt"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/router/clap"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rustfmt"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// binName is the container command (argv[0]), which clap puts in its usage.
const binName = "vllm-router"

// Version is the emulated release.
const Version = "0.1.15"

func def(long string, t clap.ValueType, v string) clap.Arg {
	return clap.Arg{Long: long, Type: t, Default: v, HasDefault: true}
}

func opt(long string, t clap.ValueType) clap.Arg { return clap.Arg{Long: long, Type: t} }

func flag(long string) clap.Arg { return clap.Arg{Long: long, Action: clap.SetTrue} }

func many(long string) clap.Arg { return clap.Arg{Long: long, Action: clap.AppendMany} }

// command is vllm-router's CliArgs (src/main.rs), field by field in
// declaration order (clap's keymap order decides suggestion ties).
func command() *clap.Command {
	policies := policy.Names(policy.FlavorVR)
	return &clap.Command{
		BinName: binName,
		About:   "VLLM Router - High-performance request distribution across worker nodes",
		Version: Version,
		Args: []clap.Arg{
			def("host", clap.String, "127.0.0.1"),
			def("port", clap.U16, "30000"),
			many("worker-urls"),
			{Long: "policy", Default: policy.CacheAware, HasDefault: true, Possible: policies},
			flag("vllm-pd-disaggregation"),
			opt("vllm-discovery-address", clap.String),
			{Long: "decode", Action: clap.Append},
			{Long: "prefill-policy", Possible: policies},
			{Long: "decode-policy", Possible: policies},
			def("worker-startup-timeout-secs", clap.U64, "600"),
			def("worker-startup-check-interval", clap.U64, "30"),
			def("cache-threshold", clap.F32, "0.3"),
			def("balance-abs-threshold", clap.Usize, "64"),
			def("balance-rel-threshold", clap.F32, "1.5"),
			def("eviction-interval", clap.U64, "120"),
			def("max-tree-size", clap.Usize, "67108864"),
			def("max-payload-size", clap.Usize, "536870912"),
			def("intra-node-data-parallel-size", clap.Usize, "1"),
			opt("api-key", clap.String),
			many("api-key-validation-urls"),
			{Long: "backend", Default: "vllm", HasDefault: true, Possible: []string{"vllm", "trtllm", "openai", "anthropic"}, Aliases: []string{"runtime"}},
			opt("log-dir", clap.String),
			{Long: "log-level", Default: "info", HasDefault: true, Possible: []string{"debug", "info", "warn", "error"}},
			flag("enable-trace"),
			opt("otlp-traces-endpoint", clap.String),
			def("otel-sampling-ratio", clap.F64, "1.0"),
			many("otel-excluded-paths"),
			flag("service-discovery"),
			many("selector"),
			def("service-discovery-port", clap.U16, "80"),
			opt("service-discovery-namespace", clap.String),
			many("prefill-selector"),
			many("decode-selector"),
			def("prometheus-port", clap.U16, "29000"),
			def("prometheus-host", clap.String, "127.0.0.1"),
			many("request-id-headers"),
			def("request-timeout-secs", clap.U64, "1800"),
			def("max-concurrent-requests", clap.Usize, "32768"),
			many("cors-allowed-origins"),
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
			flag("enable-igw"),
			{Long: "history-backend", Default: "memory", HasDefault: true, Possible: []string{"memory", "none"}},
			flag("profile"),
			{Long: "kv-connector", Default: "nixl", HasDefault: true, Possible: []string{"nixl", "mooncake", "moriio"}},
		},
	}
}

// prefillArg is one hand-parsed `--prefill URL [PORT|none]`.
type prefillArg struct {
	url  string
	port *int
}

// splitPrefill is main.rs's split_prefill_args_from_others: `--prefill` and
// its URL and optional port are taken out before clap sees the argv.
func splitPrefill(args []string) ([]prefillArg, []string, error) {
	var pre []prefillArg
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
		p := prefillArg{url: url}
		if i+1 < len(args) {
			nxt := args[i+1]
			switch {
			case strings.EqualFold(nxt, "none"):
				i++
			case !strings.HasPrefix(nxt, "-"):
				var n int
				if _, err := fmt.Sscanf(nxt, "%d", &n); err == nil && fmt.Sprint(n) == nxt && n >= 0 && n <= 65535 {
					p.port = &n
					i++
				}
			}
		}
		pre = append(pre, p)
	}
	return pre, other, nil
}

// config is the parsed CLI.
type config struct {
	m *clap.Matches

	host            string
	port            uint64
	workerURLs      []string
	policy          string
	pd              bool
	discoveryAddr   *string
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
	kvConnector     string
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
		pd:              m.Bool("vllm-pd-disaggregation"),
		discoveryAddr:   optional(m, "vllm-discovery-address"),
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
		kvConnector:     m.Value("kv-connector"),
		startupTimeout:  m.Uint("worker-startup-timeout-secs"),
		startupInterval: m.Uint("worker-startup-check-interval"),
	}
	if ns, ok := m.Optional("service-discovery-namespace"); ok {
		c.sdNamespace = ns
	}
	pc := policy.DefaultConfig()
	pc.CacheThreshold = m.Float32("cache-threshold")
	pc.BalanceAbsThreshold = int64(m.Uint("balance-abs-threshold"))
	pc.BalanceRelThreshold = m.Float32("balance-rel-threshold")
	pc.EvictionInterval = secs(m.Uint("eviction-interval"))
	pc.MaxTreeSize = int(min(m.Uint("max-tree-size"), 1<<62))
	c.policyCfg = pc
	return c
}

// policyDebug is `{:?}` of VR's PolicyConfig for name.
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
	case policy.ConsistentHash:
		return "ConsistentHash { virtual_nodes: 160 }"
	case policy.RendezvousHash:
		return "RendezvousHash"
	}
	return "RoundRobin"
}

func (c *config) optPolicyDebug(p *string) string {
	if p == nil {
		return "None"
	}
	return "Some(" + c.policyDebug(*p) + ")"
}

// modeDebug is `{:?}` of RoutingMode as to_router_config builds it.
func (c *config) modeDebug() string {
	switch {
	case c.enableIGW:
		return "Regular { worker_urls: [] }"
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
		disc := "None"
		if c.discoveryAddr != nil {
			disc = "Some(" + rustfmt.Str(*c.discoveryAddr) + ")"
		}
		return "VllmPrefillDecode { prefill_urls: " + rustfmt.Vec(pre) + ", decode_urls: " + rustfmt.StrVec(c.decode) +
			", prefill_policy: " + c.optPolicyDebug(c.prefillPolicy) + ", decode_policy: " + c.optPolicyDebug(c.decodePolicy) +
			", discovery_address: " + disc + " }"
	default:
		return "Regular { worker_urls: " + rustfmt.StrVec(c.workerURLs) + " }"
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

// modeLine is main.rs's "Mode: …" println.
func (c *config) modeLine() string {
	switch {
	case c.enableIGW:
		return "IGW (Inference Gateway)"
	case c.backend == "openai":
		return "OpenAI Backend"
	case c.pd:
		return "vLLM PD Disaggregated"
	default:
		return "Regular (" + c.backend + ")"
	}
}

// validateMode is to_router_config's mode checks; the error text is main's
// `Error: {:?}` of ConfigError.
func (c *config) validateMode() error {
	if !c.enableIGW && c.backend != "openai" {
		if c.pd {
			static := len(c.prefill) > 0 || len(c.decode) > 0
			k8s := c.serviceDisc && (len(c.prefillSel) > 0 || len(c.decodeSel) > 0)
			if !static && c.discoveryAddr == nil && !k8s {
				return fmt.Errorf("ValidationFailed { reason: %s }", rustfmt.Str("vLLM PD disaggregation mode requires one of: --vllm-discovery-address, --prefill/--decode URLs, or --service-discovery with --prefill-selector/--decode-selector"))
			}
		} else if !c.serviceDisc && len(c.workerURLs) == 0 {
			return fmt.Errorf("ValidationFailed { reason: %s }", rustfmt.Str("Regular mode requires --worker-urls when not using service discovery"))
		}
	}
	return nil
}

// validatePolicies is RouterConfig::validate for the cache_aware knobs.
func (c *config) validatePolicies() error {
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

// rustDisplayF32 is `{}` (Display) of an f32: like Debug but without ".0".
func rustDisplayF32(f float32) string {
	return strings.TrimSuffix(rustfmt.F32(f), ".0")
}
