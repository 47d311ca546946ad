package cli

import "github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/clap"

// Def is an option with a default value.
func Def(long string, t clap.ValueType, v string) clap.Arg {
	return clap.Arg{Long: long, Type: t, Default: v, HasDefault: true}
}

// Opt is an Option<T> without a default.
func Opt(long string, t clap.ValueType) clap.Arg { return clap.Arg{Long: long, Type: t} }

// Flag is a bool flag (ArgAction::SetTrue).
func Flag(long string) clap.Arg { return clap.Arg{Long: long, Action: clap.SetTrue} }

// Many is a Vec<String> taking several values per occurrence
// (num_args = 1..).
func Many(long string) clap.Arg { return clap.Arg{Long: long, Action: clap.AppendMany} }

// The groups below are declared alike, with the same defaults and in this
// order, in both routers' CliArgs (one struct both descend from); Common
// reads them. Each router splices them into its own declaration order.

// CacheAwareArgs are --cache-threshold … --max-tree-size.
func CacheAwareArgs() []clap.Arg {
	return []clap.Arg{
		Def("cache-threshold", clap.F32, "0.3"),
		Def("balance-abs-threshold", clap.Usize, "64"),
		Def("balance-rel-threshold", clap.F32, "1.5"),
		Def("eviction-interval", clap.U64, "120"),
		Def("max-tree-size", clap.Usize, "67108864"),
	}
}

// DiscoveryArgs are --service-discovery … --decode-selector.
func DiscoveryArgs() []clap.Arg {
	return []clap.Arg{
		Flag("service-discovery"),
		Many("selector"),
		Def("service-discovery-port", clap.U16, "80"),
		Opt("service-discovery-namespace", clap.String),
		Many("prefill-selector"),
		Many("decode-selector"),
	}
}

// ResilienceArgs are --retry-*, --disable-retries, --cb-*,
// --disable-circuit-breaker and --health-*.
func ResilienceArgs() []clap.Arg {
	return []clap.Arg{
		Def("retry-max-retries", clap.U32, "5"),
		Def("retry-initial-backoff-ms", clap.U64, "50"),
		Def("retry-max-backoff-ms", clap.U64, "30000"),
		Def("retry-backoff-multiplier", clap.F32, "1.5"),
		Def("retry-jitter-factor", clap.F32, "0.2"),
		Flag("disable-retries"),
		Def("cb-failure-threshold", clap.U32, "10"),
		Def("cb-success-threshold", clap.U32, "3"),
		Def("cb-timeout-duration-secs", clap.U64, "60"),
		Def("cb-window-duration-secs", clap.U64, "120"),
		Flag("disable-circuit-breaker"),
		Def("health-failure-threshold", clap.U32, "3"),
		Def("health-success-threshold", clap.U32, "2"),
		Def("health-check-timeout-secs", clap.U64, "5"),
		Def("health-check-interval-secs", clap.U64, "60"),
		Def("health-check-endpoint", clap.String, "/health"),
	}
}
