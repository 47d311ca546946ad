// Package options is the EPP's command line: every flag of
// llm-d/llm-d-router@71f4f099:pkg/epp/server/options.go (v0.10.0) with its
// default and usage text, parsed by spf13/pflag exactly as the EPP parses
// pflag.CommandLine, plus Complete and Validate with the EPP's error texts.
package options

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// Defaults (options.go NewOptions).
const (
	DefaultGRPCPort       = 9002
	DefaultGRPCHealthPort = 9003
	DefaultMetricsPort    = 9090
	DefaultPoolNamespace  = "default"
	DefaultPoolGroup      = "inference.networking.k8s.io"
)

// deprecatedMetricFlags are rejected when set and left out of "Flags processed".
var deprecatedMetricFlags = []string{
	"total-queued-requests-metric",
	"total-running-requests-metric",
	"kv-cache-usage-percentage-metric",
	"lora-info-metric",
	"cache-info-metric",
}

// IsDeprecatedMetricFlag reports whether name is one of the rejected metric flags.
func IsDeprecatedMetricFlag(name string) bool { return slices.Contains(deprecatedMetricFlags, name) }

// Options are the parsed flags.
type Options struct {
	GRPCPort              int
	EnableLeaderElection  bool
	DrainTimeout          time.Duration
	GRPCMaxRecvMsgSize    int
	GRPCMaxSendMsgSize    int
	GRPCMaxRecvMsgSizeStr string
	GRPCMaxSendMsgSizeStr string

	PoolGroup     string
	PoolNamespace string
	PoolName      string

	EndpointSelector            labels.Selector
	EndpointTargetPorts         []int
	DisableEndpointSubsetFilter bool
	EmitEndpointScores          bool

	RefreshMetricsInterval           time.Duration
	RefreshPrometheusMetricsInterval time.Duration
	MetricsStalenessThreshold        time.Duration
	TotalQueuedRequestsMetric        string
	TotalRunningRequestsMetric       string
	KVCacheUsagePercentageMetric     string
	LoRAInfoMetric                   string
	CacheInfoMetric                  string

	LogVerbosity int

	Tracing                 bool
	HealthChecking          bool
	MetricsPort             int
	GRPCHealthPort          int
	EnablePprof             bool
	CertPath                string
	EnableCertReload        bool
	SecureServing           bool
	TLSMinVersion           string
	TLSCipherSuites         []string
	MetricsEndpointAuth     bool
	MetricsClientCAFile     string
	MetricsCertDir          string
	EnableGRPCStreamMetrics bool

	ConfigFile string
	ConfigText string

	AllowExperimentalPlugins bool

	fs                  *pflag.FlagSet
	endpointSelectorStr string
	// Exists answers os.Stat for the cert paths Complete checks.
	Exists func(path string) error
}

// New returns Options with the EPP's defaults.
func New() *Options {
	return &Options{
		GRPCPort:                         DefaultGRPCPort,
		DrainTimeout:                     30 * time.Second,
		PoolGroup:                        DefaultPoolGroup,
		EndpointTargetPorts:              []int{},
		RefreshMetricsInterval:           50 * time.Millisecond,
		RefreshPrometheusMetricsInterval: 5 * time.Second,
		MetricsStalenessThreshold:        2 * time.Second,
		TotalQueuedRequestsMetric:        "vllm:num_requests_waiting",
		TotalRunningRequestsMetric:       "vllm:num_requests_running",
		KVCacheUsagePercentageMetric:     "vllm:kv_cache_usage_perc",
		LoRAInfoMetric:                   "vllm:lora_requests_info",
		CacheInfoMetric:                  "vllm:cache_config_info",
		LogVerbosity:                     2,
		Tracing:                          true,
		MetricsPort:                      DefaultMetricsPort,
		GRPCHealthPort:                   DefaultGRPCHealthPort,
		EnablePprof:                      true,
		SecureServing:                    true,
		MetricsEndpointAuth:              true,
	}
}

// FlagSet builds the flag set named name (argv[0]; pflag prints it in
// "Usage of <name>:"), bound to o, in AddFlags order.
func (o *Options) FlagSet(name string, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	o.fs = fs
	fs.IntVar(&o.GRPCPort, "grpc-port", o.GRPCPort, "gRPC port used for communicating with Envoy proxy.")
	fs.BoolVar(&o.EnableLeaderElection, "ha-enable-leader-election", o.EnableLeaderElection,
		"Enables leader election for high availability. When enabled, readiness probes will only pass on the leader.")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout,
		"Graceful shutdown drain window. On SIGTERM the EPP goes NotServing and releases its leader lease "+
			"immediately, then keeps serving ext_proc for this duration so in-flight and pre-DNS-refresh requests "+
			"are not rejected.")
	fs.StringVar(&o.GRPCMaxRecvMsgSizeStr, "grpc-max-recv-msg-size", o.GRPCMaxRecvMsgSizeStr, "Maximum size of a gRPC message to receive (e.g., 10MiB, 25MB).")
	fs.StringVar(&o.GRPCMaxSendMsgSizeStr, "grpc-max-send-msg-size", o.GRPCMaxSendMsgSizeStr, "Maximum size of a gRPC message to send (e.g., 10MiB, 25MB).")
	fs.StringVar(&o.PoolGroup, "pool-group", o.PoolGroup,
		"Kubernetes resource group of the InferencePool this Endpoint Picker is associated with. Only `inference.networking.k8s.io/v1` is currently supported.")
	fs.StringVar(&o.PoolNamespace, "pool-namespace", o.PoolNamespace,
		"Namespace of the InferencePool this Endpoint Picker is associated with.")
	fs.StringVar(&o.PoolName, "pool-name", o.PoolName, "Name of the InferencePool this Endpoint Picker is associated with.")
	fs.StringVar(&o.endpointSelectorStr, "endpoint-selector", o.endpointSelectorStr,
		"Selector to filter model server pods on. "+
			"Supports Kubernetes label selector syntax: equality-based (e.g., 'app=vllm,env=prod'), "+
			"set-based (e.g., 'env in (prod,staging),tier!=frontend'), and existence (e.g., 'key,!deprecated').")
	fs.IntSliceVar(&o.EndpointTargetPorts, "endpoint-target-ports", o.EndpointTargetPorts, "Target ports of model server pods. "+
		"Format: a comma-separated list of numbers without whitespace (e.g., '3000,3001,3002').")
	fs.BoolVar(&o.DisableEndpointSubsetFilter, "disable-endpoint-subset-filter", o.DisableEndpointSubsetFilter,
		"Disables respecting the destination endpoint subset metadata for dispatching requests in EPP.")
	fs.BoolVar(&o.EmitEndpointScores, "emit-endpoint-scores", o.EmitEndpointScores,
		"Enables emitting the scheduler's per-endpoint scores in the request-path dynamic metadata under the "+
			"'x-gateway-destination-endpoint-scores' key of the 'envoy.lb' namespace.")
	fs.DurationVar(&o.RefreshMetricsInterval, "refresh-metrics-interval", o.RefreshMetricsInterval, "Interval to refresh metrics.")
	fs.DurationVar(&o.RefreshPrometheusMetricsInterval, "refresh-prometheus-metrics-interval", o.RefreshPrometheusMetricsInterval,
		"Interval to flush Prometheus metrics.")
	fs.DurationVar(&o.MetricsStalenessThreshold, "metrics-staleness-threshold", o.MetricsStalenessThreshold,
		"Duration after which metrics are considered stale. This is used to determine if an endpoint's metrics are fresh enough.")
	const replaced = "use engineConfigs in EndpointPickerConfig instead"
	fs.StringVar(&o.TotalQueuedRequestsMetric, "total-queued-requests-metric", o.TotalQueuedRequestsMetric,
		"Prometheus metric for the number of queued requests.")
	_ = fs.MarkDeprecated("total-queued-requests-metric", replaced)
	fs.StringVar(&o.TotalRunningRequestsMetric, "total-running-requests-metric", o.TotalRunningRequestsMetric,
		"Prometheus metric for the number of running requests.")
	_ = fs.MarkDeprecated("total-running-requests-metric", replaced)
	fs.StringVar(&o.KVCacheUsagePercentageMetric, "kv-cache-usage-percentage-metric", o.KVCacheUsagePercentageMetric,
		"Prometheus metric for the fraction of KV-cache blocks currently in use (from 0 to 1).")
	_ = fs.MarkDeprecated("kv-cache-usage-percentage-metric", replaced)
	fs.StringVar(&o.LoRAInfoMetric, "lora-info-metric", o.LoRAInfoMetric,
		"Prometheus metric for the LoRA info metrics (must be in vLLM label format).")
	_ = fs.MarkDeprecated("lora-info-metric", replaced)
	fs.StringVar(&o.CacheInfoMetric, "cache-info-metric", o.CacheInfoMetric, "Prometheus metric for the cache info metrics.")
	_ = fs.MarkDeprecated("cache-info-metric", replaced)

	// logging.LoggingOptions.AddFlags: --v, then controller-runtime's zap
	// flags added through AddGoFlagSet. The EPP's JSON encoder is fixed
	// before flags are parsed, so only --v (through the level) has an effect.
	fs.IntVarP(&o.LogVerbosity, "v", "v", o.LogVerbosity, "Number for the log level verbosity.")
	fs.Var(&zapFlag{typ: "bool", boolFlag: true}, "zap-devel",
		"Development Mode defaults(encoder=consoleEncoder,logLevel=Debug,stackTraceLevel=Warn). "+
			"Production Mode defaults(encoder=jsonEncoder,logLevel=Info,stackTraceLevel=Error)")
	fs.Lookup("zap-devel").NoOptDefVal = "true"
	fs.Var(&zapFlag{typ: "encoder", allowed: []string{"json", "console"}}, "zap-encoder", "Zap log encoding (one of 'json' or 'console')")
	fs.Var(&zapFlag{typ: "level"}, "zap-log-level",
		"Zap Level to configure the verbosity of logging. Can be one of 'debug', 'info', 'error', 'panic'"+
			"or any integer value > 0 which corresponds to custom debug levels of increasing verbosity")
	fs.Var(&zapFlag{typ: "level"}, "zap-stacktrace-level",
		"Zap Level at and above which stacktraces are captured (one of 'info', 'error', 'panic').")
	fs.Var(&zapFlag{typ: "time-encoding"}, "zap-time-encoding", "Zap time encoding (one of 'epoch', 'millis', 'nano', 'iso8601', 'rfc3339' or 'rfc3339nano'). Defaults to 'epoch'.")

	fs.BoolVar(&o.Tracing, "tracing", o.Tracing, "Enables emitting traces.")
	fs.BoolVar(&o.HealthChecking, "health-checking", o.HealthChecking, "Enables health checking.")
	fs.IntVar(&o.MetricsPort, "metrics-port", o.MetricsPort, "The metrics port exposed by EPP.")
	fs.IntVar(&o.GRPCHealthPort, "grpc-health-port", o.GRPCHealthPort,
		"The port used for gRPC liveness and readiness probes.")
	fs.BoolVar(&o.EnablePprof, "enable-pprof", o.EnablePprof,
		"Enables pprof handlers. Defaults to true. Set to false to disable pprof handlers.")
	fs.StringVar(&o.CertPath, "cert-path", o.CertPath,
		"The path to the certificate for secure serving. The certificate and private key files "+
			"are assumed to be named tls.crt and tls.key, respectively. If not set, and secureServing is enabled, "+
			"then a self-signed certificate is used.")
	fs.BoolVar(&o.EnableCertReload, "enable-cert-reload", o.EnableCertReload,
		"Enables certificate reloading of the certificates specified in --cert-path.")
	fs.BoolVar(&o.EnableGRPCStreamMetrics, "enable-grpc-stream-metrics", o.EnableGRPCStreamMetrics,
		"Enables ext_proc gRPC stream metrics (in-flight gauge, hold-duration histogram, completions counter by code).")
	fs.BoolVar(&o.SecureServing, "secure-serving", o.SecureServing, "Enables secure serving.")
	fs.StringVar(&o.TLSMinVersion, "tls-min-version", o.TLSMinVersion,
		"Minimum TLS version for secure serving (e.g., VersionTLS12, VersionTLS13).")
	fs.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", o.TLSCipherSuites,
		"Comma-separated list of TLS cipher suites for secure serving (Go crypto/tls names, e.g., TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256). Only effective for TLS 1.2 and below; TLS 1.3 cipher suites are not configurable.")
	fs.BoolVar(&o.MetricsEndpointAuth, "metrics-endpoint-auth", o.MetricsEndpointAuth,
		"Enables authentication and authorization of the metrics endpoint.")
	fs.StringVar(&o.MetricsClientCAFile, "metrics-client-ca-file", o.MetricsClientCAFile,
		"PEM CA for metrics mTLS: require verified client certs.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir,
		"Directory with the metrics server certificates. Enables TLS on the metrics endpoint.")
	fs.StringVar(&o.ConfigFile, "config-file", o.ConfigFile, "The path to the configuration file.")
	fs.StringVar(&o.ConfigText, "config-text", o.ConfigText, "The configuration specified as text, in lieu of a file.")
	fs.BoolVar(&o.AllowExperimentalPlugins, "allow-experimental-plugins", o.AllowExperimentalPlugins,
		"Allows loading of experimental Alpha plugins.")
	return fs
}

// zapFlag stands in for controller-runtime's zap flag values: they only
// carry unexported fields, so "Flags processed" renders each as {}.
type zapFlag struct {
	typ      string
	boolFlag bool
	allowed  []string
	value    string
}

func (z *zapFlag) String() string { return z.value }
func (z *zapFlag) Type() string   { return z.typ }
func (z *zapFlag) IsBoolFlag() bool {
	return z.boolFlag
}
func (z *zapFlag) Set(v string) error {
	if len(z.allowed) > 0 && !slices.Contains(z.allowed, strings.ToLower(v)) {
		return fmt.Errorf("invalid encoder value \"%s\"", v)
	}
	z.value = v
	return nil
}

// Processed is the "Flags processed" map: every flag by name except the
// deprecated metric flags, valued with the flag's pflag.Value (which the
// logger reflects through encoding/json).
func (o *Options) Processed() map[string]any {
	flags := map[string]any{}
	o.fs.VisitAll(func(f *pflag.Flag) {
		if !IsDeprecatedMetricFlag(f.Name) {
			flags[f.Name] = f.Value
		}
	})
	return flags
}

// Usage is what pflag prints for this flag set: "Usage of <name>:" and the
// flag table.
func Usage(fs *pflag.FlagSet) string {
	return "Usage of " + fs.Name() + ":\n" + fs.FlagUsages()
}

var (
	errMetricsClientCARequiresCertDir = errors.New(`"metrics-client-ca-file" requires "metrics-cert-dir"`)
	errMetricsTLSWithoutAuth          = errors.New(`"metrics-cert-dir" enables metrics TLS without authentication; set "metrics-client-ca-file" or "metrics-endpoint-auth"`)
	errMetricsCertUnreadable          = errors.New("metrics TLS cert file unreadable")
)

// Complete parses the selector and sizes (Options.Complete).
func (o *Options) Complete() error {
	if o.endpointSelectorStr != "" {
		selector, err := labels.Parse(o.endpointSelectorStr)
		if err != nil {
			return fmt.Errorf("invalid endpoint-selector %q: %w", o.endpointSelectorStr, err)
		}
		o.EndpointSelector = selector
	}
	o.EndpointTargetPorts = removeDuplicatePorts(o.EndpointTargetPorts)
	for _, s := range []struct {
		name string
		raw  string
		dst  *int
	}{{"grpc-max-recv-msg-size", o.GRPCMaxRecvMsgSizeStr, &o.GRPCMaxRecvMsgSize},
		{"grpc-max-send-msg-size", o.GRPCMaxSendMsgSizeStr, &o.GRPCMaxSendMsgSize}} {
		if s.raw == "" {
			continue
		}
		v := sanitizeSizeString(s.raw)
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("invalid %s: %w", s.name, err)
		}
		val, ok := q.AsInt64()
		if !ok {
			return fmt.Errorf("%s overflows maximum supported size: %s", s.name, v)
		}
		if val < 0 {
			return fmt.Errorf("%s must be non-negative, got %d", s.name, val)
		}
		if val > int64(math.MaxInt) {
			return fmt.Errorf("%s overflows int: %d", s.name, val)
		}
		*s.dst = int(val)
	}
	stat := o.Exists
	if stat == nil {
		stat = func(string) error { return errors.New("no such file or directory") }
	}
	if o.MetricsClientCAFile != "" {
		if err := stat(o.MetricsClientCAFile); err != nil {
			return fmt.Errorf("%w: %s: %v", errMetricsCertUnreadable, o.MetricsClientCAFile, err)
		}
	}
	if o.MetricsCertDir != "" {
		for _, name := range []string{"tls.crt", "tls.key"} {
			p := strings.TrimRight(o.MetricsCertDir, "/") + "/" + name
			if err := stat(p); err != nil {
				return fmt.Errorf("%w: %s: %v", errMetricsCertUnreadable, p, err)
			}
		}
	}
	if o.TLSMinVersion != "" {
		if _, ok := tlsVersions[o.TLSMinVersion]; !ok {
			return fmt.Errorf("invalid tls-min-version %q: %w", o.TLSMinVersion,
				fmt.Errorf("unknown TLS version %q; supported values: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13", o.TLSMinVersion))
		}
	}
	if len(o.TLSCipherSuites) > 0 {
		if err := checkCipherSuites(o.TLSCipherSuites); err != nil {
			return fmt.Errorf("invalid tls-cipher-suites: %w", err)
		}
	}
	return nil
}

// Validate applies the EPP's flag rules (Options.Validate).
func (o *Options) Validate() error {
	if (o.PoolName != "" && o.EndpointSelector != nil) || (o.PoolName == "" && o.EndpointSelector == nil) {
		return errors.New("either pool-name or endpoint-selector must be set")
	}
	if o.EndpointSelector != nil {
		if len(o.EndpointTargetPorts) == 0 || len(o.EndpointTargetPorts) > 8 {
			return fmt.Errorf("flag %q should have length from 1 to 8", "endpoint-target-ports")
		}
		for _, port := range o.EndpointTargetPorts {
			if port < 0 || port > 65535 {
				return fmt.Errorf("invalid port number %d in %q", port, "endpoint-target-ports")
			}
		}
	}
	if o.ConfigText != "" && o.ConfigFile != "" {
		return fmt.Errorf("both the %q and %q flags cannot be set at the same time", "config-file", "config-text")
	}
	if o.MetricsClientCAFile != "" && o.MetricsCertDir == "" {
		return errMetricsClientCARequiresCertDir
	}
	if o.MetricsCertDir != "" && o.MetricsClientCAFile == "" && !o.MetricsEndpointAuth {
		return errMetricsTLSWithoutAuth
	}
	if o.GRPCMaxRecvMsgSize < 0 {
		return fmt.Errorf("grpc-max-recv-msg-size must be non-negative, got %d", o.GRPCMaxRecvMsgSize)
	}
	if o.GRPCMaxSendMsgSize < 0 {
		return fmt.Errorf("grpc-max-send-msg-size must be non-negative, got %d", o.GRPCMaxSendMsgSize)
	}
	// The source ranges over a map; report in a fixed order.
	for _, name := range deprecatedMetricFlags {
		if f := o.fs.Lookup(name); f != nil && f.Changed {
			return fmt.Errorf("flag %q is deprecated and cannot be used; configure metrics via engineConfigs in EndpointPickerConfig instead", name)
		}
	}
	if o.LogVerbosity < 0 {
		o.LogVerbosity = 2
	}
	return nil
}

// Namespace resolves --pool-namespace, then NAMESPACE, then "default"
// (runner.go resolvePoolNamespace).
func (o *Options) Namespace(env map[string]string) string {
	if o.PoolNamespace != "" {
		return o.PoolNamespace
	}
	if ns := env["NAMESPACE"]; ns != "" {
		return ns
	}
	return DefaultPoolNamespace
}

func sanitizeSizeString(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 1 && (s[len(s)-1] == 'B' || s[len(s)-1] == 'b') {
		return s[:len(s)-1]
	}
	return s
}

func removeDuplicatePorts(ports []int) []int {
	out := make([]int, 0, len(ports))
	for _, p := range ports {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

var tlsVersions = map[string]uint16{
	"VersionTLS10": tls.VersionTLS10,
	"VersionTLS11": tls.VersionTLS11,
	"VersionTLS12": tls.VersionTLS12,
	"VersionTLS13": tls.VersionTLS13,
}

func checkCipherSuites(names []string) error {
	known := map[string]bool{}
	for _, cs := range tls.CipherSuites() {
		known[cs.Name] = true
	}
	for _, cs := range tls.InsecureCipherSuites() {
		known[cs.Name] = true
	}
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name != "" && !known[name] {
			return fmt.Errorf("unknown cipher suite %q", name)
		}
	}
	return nil
}
