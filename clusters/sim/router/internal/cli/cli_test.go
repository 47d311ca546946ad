package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/clap"
)

var policies = []string{"random", "round_robin", "cache_aware", "power_of_two"}

// command declares every flag Common reads, as the routers' CliArgs do.
func command() *clap.Command {
	return &clap.Command{BinName: "router", Version: "1.0", Args: slices.Concat([]clap.Arg{
		Def("host", clap.String, "127.0.0.1"),
		Def("port", clap.U16, "30000"),
		Many("worker-urls"),
		{Long: "policy", Default: "cache_aware", HasDefault: true, Possible: policies},
		Flag("pd-disaggregation"),
		{Long: "decode", Action: clap.Append},
		{Long: "prefill-policy", Possible: policies},
		{Long: "decode-policy", Possible: policies},
		Def("worker-startup-timeout-secs", clap.U64, "600"),
		Def("worker-startup-check-interval", clap.U64, "30"),
	}, CacheAwareArgs(), []clap.Arg{
		Def("max-payload-size", clap.Usize, "536870912"),
		{Long: "backend", Default: "vllm", HasDefault: true, Possible: []string{"vllm", "trtllm", "openai"}},
		{Long: "log-level", Default: "info", HasDefault: true, Possible: []string{"debug", "info"}},
	}, DiscoveryArgs(), []clap.Arg{
		Def("prometheus-port", clap.U16, "29000"),
		Def("prometheus-host", clap.String, "127.0.0.1"),
		Many("request-id-headers"),
		Def("request-timeout-secs", clap.U64, "1800"),
	}, ResilienceArgs(), []clap.Arg{
		Flag("enable-igw"),
	})}
}

func common(t *testing.T, args ...string) *Common {
	t.Helper()
	m, code := Parse(command(), args, &bytes.Buffer{}, &bytes.Buffer{})
	if m == nil {
		t.Fatalf("parse %v: exit %d", args, code)
	}
	c := NewCommon(m, "pd-disaggregation", []PrefillArg{{URL: "http://p:1"}})
	return &c
}

func TestParseWritesClapTextWhereClapDoes(t *testing.T) {
	var out, errw bytes.Buffer
	if m, code := Parse(command(), []string{"--version"}, &out, &errw); m != nil || code != 0 || out.String() != "router 1.0\n" || errw.Len() != 0 {
		t.Fatalf("--version: %v %d %q %q", m, code, out.String(), errw.String())
	}
	out.Reset()
	if m, code := Parse(command(), []string{"--polcy=random"}, &out, &errw); m != nil || code != 2 || out.Len() != 0 ||
		!strings.HasPrefix(errw.String(), "error: unexpected argument '--polcy' found") {
		t.Fatalf("typo: %v %d %q %q", m, code, out.String(), errw.String())
	}
}

func TestNewCommonReadsTheSharedFlags(t *testing.T) {
	c := common(t, "--pd-disaggregation", "--service-discovery", "--service-discovery-namespace=ns",
		"--selector", "a=b", "c", "--prefill-selector", "r=p", "--decode", "http://d:1", "--decode-policy=random")
	if !c.PD || !c.ServiceDiscovery || c.SDNamespace != "ns" || c.Selector["a"] != "b" || len(c.Selector) != 1 ||
		c.PrefillSelector["r"] != "p" || len(c.Decode) != 1 || c.PrefillPolicy != nil || Deref(c.DecodePolicy) != "random" ||
		c.SDPort != 80 || c.Prefill[0].URL != "http://p:1" {
		t.Fatalf("%+v", c)
	}
	d := c.Discovery("x/bootstrap-port")
	if !d.PD || d.Namespace != "ns" || d.Port != 80 || d.BootstrapAnnotation != "x/bootstrap-port" || d.PrefillSelector["r"] != "p" {
		t.Fatalf("discovery %+v", d)
	}
}

// TestValidateCacheAwareChecksEveryPoolUsingIt: the knobs are validated
// when any of --policy, --prefill-policy, --decode-policy is cache_aware,
// and only then.
func TestValidateCacheAwareChecksEveryPoolUsingIt(t *testing.T) {
	if err := common(t, "--policy=random", "--cache-threshold=2").ValidateCacheAware(); err != nil {
		t.Fatalf("no cache_aware pool, still refused: %v", err)
	}
	err := common(t, "--policy=random", "--decode-policy=cache_aware", "--cache-threshold=2").ValidateCacheAware()
	if err == nil || err.Error() != `InvalidValue { field: "cache_threshold", value: "2", reason: "Must be between 0.0 and 1.0" }` {
		t.Fatalf("%v", err)
	}
	if err := common(t, "--balance-rel-threshold=0.5").ValidateCacheAware(); err == nil || !strings.Contains(err.Error(), `value: "0.5", reason: "Must be >= 1.0"`) {
		t.Fatalf("%v", err)
	}
}

func TestRetryAndCircuitHonourTheirDisableFlags(t *testing.T) {
	c := common(t)
	if c.Retry().MaxRetries != 5 || c.Circuit().FailureThreshold != 10 || c.Health().Endpoint != "/health" {
		t.Fatalf("defaults %+v %+v %+v", c.Retry(), c.Circuit(), c.Health())
	}
	c = common(t, "--disable-retries", "--disable-circuit-breaker")
	if c.Retry().MaxRetries != 1 || c.Circuit().FailureThreshold != 1<<32-1 {
		t.Fatalf("disabled %+v %+v", c.Retry(), c.Circuit())
	}
}

func TestPrintStartupSaysWhatEachRouterDiffersIn(t *testing.T) {
	s := Startup{Name: "X Router", PDMode: "X PD", Unimplemented: []string{"trtllm"}}
	var out bytes.Buffer
	c := common(t, "--pd-disaggregation", "--backend=trtllm", "--decode", "http://d:1")
	c.PrintStartup(&out, s)
	want := "X Router starting...\nHost: 127.0.0.1:30000\nMode: X PD\n" +
		"WARNING: runtime 'trtllm' not implemented yet; falling back to regular routing. Provide --worker-urls or PD flags as usual.\n" +
		"Policy: cache_aware\nPrefill nodes: [(\"http://p:1\", None)]\nDecode nodes: [\"http://d:1\"]\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	c = common(t, "--enable-igw")
	c.PrintStartup(&out, s)
	if out.String() != "X Router starting...\nHost: 127.0.0.1:30000\nMode: IGW (Inference Gateway)\n" {
		t.Fatalf("IGW: %q", out.String())
	}
}

func TestCommonPolicyDebugFallsBackToRoundRobin(t *testing.T) {
	c := common(t, "--cache-threshold=1")
	for name, want := range map[string]string{
		"random":       "Random",
		"power_of_two": "PowerOfTwo { load_check_interval_secs: 5 }",
		"cache_aware":  "CacheAware { cache_threshold: 1.0, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 }",
		"round_robin":  "RoundRobin",
		"other":        "RoundRobin",
	} {
		if got := c.CommonPolicyDebug(name); got != want {
			t.Errorf("%s: %q", name, got)
		}
	}
}
