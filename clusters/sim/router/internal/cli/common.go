package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/clap"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/debug"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// Common is the part of CliArgs both routers have, parsed.
type Common struct {
	// Flags are all the matches, for the flags read only where used.
	Flags *clap.Matches

	Host       string
	Port       uint64
	WorkerURLs []string
	Policy     string
	// PD is --vllm-pd-disaggregation (VR) or --pd-disaggregation (SG).
	PD            bool
	Decode        []string
	Prefill       []PrefillArg
	PrefillPolicy *string
	DecodePolicy  *string
	MaxPayload    uint64
	Backend       string
	LogLevel      string

	ServiceDiscovery bool
	Selector         map[string]string
	PrefillSelector  map[string]string
	DecodeSelector   map[string]string
	SDPort           uint64
	SDNamespace      string

	PromHost         string
	PromPort         uint64
	RequestIDHeaders []string
	RequestTimeout   uint64
	EnableIGW        bool
	StartupTimeout   uint64
	StartupInterval  uint64
}

// NewCommon reads the common flags from m; pdFlag is the router's name for
// the PD switch and prefill the --prefill arguments main took out.
func NewCommon(m *clap.Matches, pdFlag string, prefill []PrefillArg) Common {
	c := Common{
		Flags:            m,
		Host:             m.Value("host"),
		Port:             m.Uint("port"),
		WorkerURLs:       m.Values("worker-urls"),
		Policy:           m.Value("policy"),
		PD:               m.Bool(pdFlag),
		Decode:           m.Values("decode"),
		Prefill:          prefill,
		PrefillPolicy:    Optional(m, "prefill-policy"),
		DecodePolicy:     Optional(m, "decode-policy"),
		MaxPayload:       m.Uint("max-payload-size"),
		Backend:          m.Value("backend"),
		LogLevel:         m.Value("log-level"),
		ServiceDiscovery: m.Bool("service-discovery"),
		Selector:         discovery.ParseSelector(m.Values("selector")),
		PrefillSelector:  discovery.ParseSelector(m.Values("prefill-selector")),
		DecodeSelector:   discovery.ParseSelector(m.Values("decode-selector")),
		SDPort:           m.Uint("service-discovery-port"),
		PromHost:         m.Value("prometheus-host"),
		PromPort:         m.Uint("prometheus-port"),
		RequestIDHeaders: m.Values("request-id-headers"),
		RequestTimeout:   m.Uint("request-timeout-secs"),
		EnableIGW:        m.Bool("enable-igw"),
		StartupTimeout:   m.Uint("worker-startup-timeout-secs"),
		StartupInterval:  m.Uint("worker-startup-check-interval"),
	}
	if ns, ok := m.Optional("service-discovery-namespace"); ok {
		c.SDNamespace = ns
	}
	return c
}

// Startup is what the routers' main println blocks say differently.
type Startup struct {
	// Name starts the first line, "<Name> starting...".
	Name string
	// PDMode is the "Mode:" line's text in PD mode.
	PDMode string
	// Unimplemented are the --backend values main warns about.
	Unimplemented []string
}

// PrintStartup is main's println block before the router config is built:
// name, host, mode, the runtime warning, then (outside IGW) the policy and
// the static PD nodes.
func (c *Common) PrintStartup(out io.Writer, s Startup) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("%s starting...", s.Name)
	p("Host: %s:%d", c.Host, c.Port)
	p("Mode: %s", c.modeLine(s.PDMode))
	if slices.Contains(s.Unimplemented, c.Backend) {
		p("WARNING: runtime '%s' not implemented yet; falling back to regular routing. Provide --worker-urls or PD flags as usual.", c.Backend)
	}
	if !c.EnableIGW {
		p("Policy: %s", c.Policy)
		if c.PD && len(c.Prefill) > 0 {
			p("Prefill nodes: %s", PrefillDebug(c.Prefill))
			p("Decode nodes: %s", debug.StrVec(c.Decode))
		}
	}
}

func (c *Common) modeLine(pdMode string) string {
	switch {
	case c.EnableIGW:
		return "IGW (Inference Gateway)"
	case c.Backend == "openai":
		return "OpenAI Backend"
	case c.PD:
		return pdMode
	default:
		return "Regular (" + c.Backend + ")"
	}
}

// Discovery is the ServiceDiscoveryConfig the flags describe;
// bootstrapAnnotation is the router's prefill bootstrap-port annotation.
func (c *Common) Discovery(bootstrapAnnotation string) discovery.Config {
	return discovery.Config{
		Namespace:           c.SDNamespace,
		Selector:            c.Selector,
		PD:                  c.PD,
		PrefillSelector:     c.PrefillSelector,
		DecodeSelector:      c.DecodeSelector,
		Port:                int(c.SDPort),
		BootstrapAnnotation: bootstrapAnnotation,
	}
}

// Retry is --retry-*; --disable-retries leaves one attempt.
func (c *Common) Retry() routerbase.RetryConfig {
	m := c.Flags
	cfg := routerbase.RetryConfig{
		MaxRetries:     uint32(m.Uint("retry-max-retries")),
		InitialBackoff: m.Uint("retry-initial-backoff-ms"),
		MaxBackoff:     m.Uint("retry-max-backoff-ms"),
		Multiplier:     m.Float32("retry-backoff-multiplier"),
		Jitter:         m.Float32("retry-jitter-factor"),
	}
	if m.Bool("disable-retries") {
		cfg.MaxRetries = 1
	}
	return cfg
}

// Circuit is --cb-*; --disable-circuit-breaker sets the failure threshold
// to u32::MAX, as the routers' effective config does.
func (c *Common) Circuit() workers.CircuitConfig {
	m := c.Flags
	cfg := workers.CircuitConfig{
		FailureThreshold: int(m.Uint("cb-failure-threshold")),
		SuccessThreshold: int(m.Uint("cb-success-threshold")),
		Timeout:          Secs(m.Uint("cb-timeout-duration-secs")),
	}
	if m.Bool("disable-circuit-breaker") {
		cfg.FailureThreshold = int(^uint32(0))
	}
	return cfg
}

// Health is --health-*.
func (c *Common) Health() workers.HealthConfig {
	m := c.Flags
	return workers.HealthConfig{
		Interval:         Secs(m.Uint("health-check-interval-secs")),
		Timeout:          Secs(m.Uint("health-check-timeout-secs")),
		Endpoint:         m.Value("health-check-endpoint"),
		FailureThreshold: int(m.Uint("health-failure-threshold")),
		SuccessThreshold: int(m.Uint("health-success-threshold")),
	}
}

// CommonPolicyDebug is `{:?}` of the PolicyConfig variants both routers'
// enums have (Random, RoundRobin, CacheAware, PowerOfTwo); any other name
// renders as RoundRobin, both routers' fallback.
func (c *Common) CommonPolicyDebug(name string) string {
	switch name {
	case policy.Random:
		return "Random"
	case policy.CacheAware:
		m := c.Flags
		return fmt.Sprintf("CacheAware { cache_threshold: %s, balance_abs_threshold: %d, balance_rel_threshold: %s, eviction_interval_secs: %d, max_tree_size: %d }",
			debug.F32(m.Float32("cache-threshold")), m.Uint("balance-abs-threshold"),
			debug.F32(m.Float32("balance-rel-threshold")), m.Uint("eviction-interval"), m.Uint("max-tree-size"))
	case policy.PowerOfTwo:
		return "PowerOfTwo { load_check_interval_secs: 5 }"
	}
	return "RoundRobin"
}

// ValidateCacheAware is RouterConfig::validate's checks of the cache_aware
// knobs, run when --policy, --prefill-policy or --decode-policy is
// cache_aware; the error text is main's `Error: {:?}` of ConfigError.
func (c *Common) ValidateCacheAware() error {
	m := c.Flags
	for _, p := range []string{c.Policy, Deref(c.PrefillPolicy), Deref(c.DecodePolicy)} {
		if p != policy.CacheAware {
			continue
		}
		ct := m.Float32("cache-threshold")
		if ct < 0 || ct > 1 {
			return invalidValue("cache_threshold", rustDisplayF32(ct), "Must be between 0.0 and 1.0")
		}
		if br := m.Float32("balance-rel-threshold"); br < 1 {
			return invalidValue("balance_rel_threshold", rustDisplayF32(br), "Must be >= 1.0")
		}
		if m.Uint("eviction-interval") == 0 {
			return invalidValue("eviction_interval_secs", "0", "Must be > 0")
		}
		if m.Uint("max-tree-size") == 0 {
			return invalidValue("max_tree_size", "0", "Must be > 0")
		}
	}
	return nil
}

func invalidValue(field, value, reason string) error {
	return fmt.Errorf("InvalidValue { field: %s, value: %s, reason: %s }", debug.Str(field), debug.Str(value), debug.Str(reason))
}

// rustDisplayF32 is `{}` (Display) of an f32: like Debug but without ".0".
func rustDisplayF32(f float32) string { return strings.TrimSuffix(debug.F32(f), ".0") }
