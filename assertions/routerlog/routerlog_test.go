package routerlog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/assertions/routerlog"
	"github.com/gpustack/routing-conformance/internal/ansi"
)

const (
	dim   = "\x1b[2m"
	green = "\x1b[32m"
	reset = "\x1b[0m"
)

// tracingLine writes a line the way tracing-subscriber's full format does
// with ANSI on: dimmed time, green padded level, dimmed target and file:line.
func tracingLine(target, file string, line int, msg string) string {
	return dim + "2026-12-02 15:45:01" + reset + " " + green + " INFO" + reset + " " +
		dim + target + reset + dim + ":" + reset + " " +
		dim + file + reset + dim + ":" + reset + dim + itoa(line) + reset + dim + ":" + reset + " " + msg
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

const (
	cacheAware = "CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 }"
	vrTarget   = "vllm_router_rs::server"
	sgTarget   = "smg::server"
)

func vrBanner(mode, policy, kv string) string {
	return tracingLine(vrTarget, "src/server.rs", 828, "Starting router on 0.0.0.0:8081 | mode: "+mode+" | policy: "+policy+" | kv_connector: "+kv+" | max_payload: 512MB")
}

func sgBanner(policy string) string {
	return tracingLine(sgTarget, "src/server.rs", 1001, "Starting router on 0.0.0.0:8081 | mode: Regular { worker_urls: [] } | policy: "+policy+" | max_payload: 512MB")
}

// vrStartup is vllm-router's stdout under the operator (docs/routers.md#other-startup-lines).
func vrStartup(banner string) string {
	return strings.Join([]string{
		"DEBUG: Parsed args: service_discovery=true selector=[\"app.kubernetes.io/instance=md\"]",
		"VLLM Router starting...",
		"Host: 0.0.0.0:8081",
		"Mode: Regular (vllm)",
		"Policy: cache_aware",
		tracingLine("vllm_router_rs::metrics", "src/metrics.rs", 34, "Prometheus exporter listening on 0.0.0.0:9090"),
		banner,
		tracingLine("vllm_router_rs::server", "src/server.rs", 860, "Single router mode (enable_igw=false)"),
		tracingLine("vllm_router_rs::service_discovery", "src/service_discovery.rs", 212, "Adding pod: md-engine-0 | type: Some(Regular) | url: http://127.3.0.7:8000"),
	}, "\n") + "\n"
}

func TestTracingPrefixIsSplitOff(t *testing.T) {
	l := routerlog.ParseLine(3, tracingLine(vrTarget, "src/server.rs", 828, "Starting router on x"))
	if l.Time != "2026-12-02 15:45:01" || l.Level != "INFO" || l.Target != vrTarget || l.Location != "src/server.rs:828" || l.Message != "Starting router on x" || l.Number != 3 {
		t.Errorf("%+v", l)
	}
	if strings.Contains(l.Text, "\x1b") {
		t.Errorf("Text keeps ANSI: %q", l.Text)
	}
	// kubectl logs --timestamps adds its own stamp in front.
	l = routerlog.ParseLine(1, "2026-12-02T15:45:01.123456789Z "+tracingLine(sgTarget, "src/server.rs", 1, "hello"))
	if l.Target != sgTarget || l.Message != "hello" {
		t.Errorf("%+v", l)
	}
	l = routerlog.ParseLine(1, "VLLM Router starting...")
	if l.Level != "" || l.Message != "VLLM Router starting..." {
		t.Errorf("%+v", l)
	}
}

func TestVRBannerWithANSI(t *testing.T) {
	b, err := routerlog.FindBanner(vrStartup(vrBanner("Regular { worker_urls: [] }", cacheAware, "Nixl")))
	if err != nil {
		t.Fatal(err)
	}
	if b.PolicyName() != "CacheAware" || b.ModeName() != "Regular" || b.Address != "0.0.0.0:8081" || b.MaxPayload != "512MB" {
		t.Errorf("%+v", b)
	}
	if !b.HasKVConnector || b.KVConnector.TypeName() != "Nixl" {
		t.Errorf("kv_connector = %v %v", b.HasKVConnector, b.KVConnector)
	}
	if b.Policy.String() != cacheAware {
		t.Errorf("policy = %s", b.Policy)
	}
	if b.Line.Number != 7 || b.Line.Target != vrTarget {
		t.Errorf("line = %+v", b.Line)
	}
	urls, _ := b.Mode.Field("worker_urls")
	if len(urls.Items) != 0 {
		t.Errorf("worker_urls = %v", urls)
	}
	// A report entry shows the forms as the router printed them.
	js, err := json.Marshal(b)
	if err != nil || !strings.Contains(string(js), `"policy":"`+cacheAware+`"`) || !strings.Contains(string(js), `"kvConnector":"Nixl"`) {
		t.Errorf("JSON = %s, %v", js, err)
	}
}

func TestSGBannerHasNoKVConnector(t *testing.T) {
	logs := "SGLang Router starting...\nHost: 0.0.0.0:8081\nMode: IGW (Inference Gateway)\nINFO: IGW mode automatically enabled because service discovery is turned on\n" +
		sgBanner("PrefixHash { prefix_token_count: 256, load_factor: 1.25 }") + "\n"
	b, err := routerlog.FindBanner(logs)
	if err != nil {
		t.Fatal(err)
	}
	if b.HasKVConnector || b.PolicyName() != "PrefixHash" || b.Line.Target != sgTarget {
		t.Errorf("%+v", b)
	}
	if lf, _ := b.Policy.Field("load_factor"); !lf.Matches(1.25) {
		t.Errorf("load_factor = %v", lf)
	}
}

func TestEveryPolicyFormInABanner(t *testing.T) {
	for _, p := range []string{"Random", "RoundRobin", "RendezvousHash", cacheAware, "PowerOfTwo { load_check_interval_secs: 5 }", "ConsistentHash { virtual_nodes: 160 }", "PrefixHash { prefix_token_count: 256, load_factor: 1.25 }", "Manual { eviction_interval_secs: 120, max_idle_secs: 14400 }"} {
		b, err := routerlog.FindBanner(vrBanner("Regular { worker_urls: [] }", p, "Mooncake"))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if b.Policy.String() != p || b.KVConnector.TypeName() != "Mooncake" {
			t.Errorf("%s: policy %s kv %s", p, b.Policy, b.KVConnector)
		}
	}
}

func TestPrefillDecodeModeBanner(t *testing.T) {
	mode := `VllmPrefillDecode { prefill_urls: [("http://127.3.0.7:8000", Some(8998))], decode_urls: ["http://127.3.0.8:8000"], prefill_policy: Some(RoundRobin), decode_policy: None, discovery_address: None }`
	b, err := routerlog.FindBanner(vrBanner(mode, cacheAware, "Nixl"))
	if err != nil {
		t.Fatal(err)
	}
	if b.ModeName() != "VllmPrefillDecode" {
		t.Errorf("mode = %s", b.Mode)
	}
	pp, _ := b.Mode.Field("prefill_policy")
	if inner, ok := pp.Unwrap(); !ok || inner.TypeName() != "RoundRobin" {
		t.Errorf("prefill_policy = %s", pp)
	}
}

func TestLastBannerWinsAfterRestart(t *testing.T) {
	logs := vrStartup(vrBanner("Regular { worker_urls: [] }", cacheAware, "Nixl")) + vrStartup(vrBanner("Regular { worker_urls: [] }", "RoundRobin", "Nixl"))
	bs, bad := routerlog.FindBanners(logs)
	if len(bs) != 2 || len(bad) != 0 {
		t.Fatalf("%d banners, %v", len(bs), bad)
	}
	b, _ := routerlog.FindBanner(logs)
	if b.PolicyName() != "RoundRobin" || b.Line.Number != 16 {
		t.Errorf("last banner = %s at %d", b.PolicyName(), b.Line.Number)
	}
}

func TestNoBannerShowsTheTail(t *testing.T) {
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, "line "+itoa(i))
	}
	_, err := routerlog.FindBanner(strings.Join(lines, "\n"))
	if !routerlog.IsNoBanner(err) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "30 log lines") || !strings.Contains(msg, "| line 11\n") || strings.Contains(msg, "| line 10\n") || !strings.HasSuffix(msg, "| line 30") {
		t.Errorf("message:\n%s", msg)
	}
	_, err = routerlog.FindBanner("")
	if !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty log: %v", err)
	}
}

func TestMalformedBannerIsReported(t *testing.T) {
	_, err := routerlog.FindBanner(tracingLine(vrTarget, "src/server.rs", 1, "Starting router on 0.0.0.0:8081 | mode: Regular { worker_urls: [ } | policy: RoundRobin"))
	if err == nil || !strings.Contains(err.Error(), "unparseable banner") || !strings.Contains(err.Error(), "mode:") {
		t.Errorf("err = %v", err)
	}
	_, err = routerlog.FindBanner("Starting router on 0.0.0.0:8081 | mode: Regular { worker_urls: [] }")
	if err == nil || !strings.Contains(err.Error(), "no `policy:` part") {
		t.Errorf("err = %v", err)
	}
}

const clapTip = "error: invalid value 'roundrobin' for '--policy <POLICY>'\n  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n\n  tip: a similar value exists: 'round_robin'\n\nFor more information, try '--help'.\n"

const clapNoTip = "error: invalid value 'foo' for '--policy <POLICY>'\n  [possible values: random, round_robin, cache_aware, power_of_two, prefix_hash, manual]\n\nFor more information, try '--help'.\n"

func TestClapInvalidValueWithTip(t *testing.T) {
	ce, err := routerlog.FindClapError("DEBUG: args parsed\n" + clapTip)
	if err != nil {
		t.Fatal(err)
	}
	if ce.Kind != routerlog.InvalidValue || ce.Value != "roundrobin" || ce.Arg != "--policy <POLICY>" || ce.Flag != "--policy" || ce.Line != 2 {
		t.Errorf("%+v", ce)
	}
	if strings.Join(ce.PossibleValues, ",") != "random,round_robin,cache_aware,power_of_two,consistent_hash,rendezvous_hash" {
		t.Errorf("possible values = %q", ce.PossibleValues)
	}
	if len(ce.Tips) != 1 || ce.Tips[0] != "round_robin" {
		t.Errorf("tips = %q", ce.Tips)
	}
	if !strings.HasSuffix(ce.Text, "For more information, try '--help'.") {
		t.Errorf("text = %q", ce.Text)
	}
}

func TestClapInvalidValueWithoutTip(t *testing.T) {
	ce, err := routerlog.FindClapError(clapNoTip)
	if err != nil {
		t.Fatal(err)
	}
	if ce.Value != "foo" || len(ce.Tips) != 0 || len(ce.PossibleValues) != 6 || ce.PossibleValues[5] != "manual" {
		t.Errorf("%+v", ce)
	}
}

func TestClapPrefillPolicyAndColour(t *testing.T) {
	coloured := "\x1b[1m\x1b[31merror:\x1b[0m invalid value '\x1b[33mrr\x1b[0m' for '\x1b[1m--prefill-policy <PREFILL_POLICY>\x1b[0m'\n  [possible values: \x1b[32mrandom\x1b[0m, \x1b[32mround_robin\x1b[0m]\n\n  \x1b[32mtip:\x1b[0m some similar values exist: 'random', 'round_robin'\n"
	ce, err := routerlog.FindClapError(coloured)
	if err != nil {
		t.Fatal(err)
	}
	if ce.Flag != "--prefill-policy" || ce.Value != "rr" || strings.Join(ce.Tips, ",") != "random,round_robin" || len(ce.PossibleValues) != 2 {
		t.Errorf("%+v", ce)
	}
}

func TestClapArgumentUsedTwice(t *testing.T) {
	out := "error: the argument '--request-timeout-secs <REQUEST_TIMEOUT_SECS>' cannot be used multiple times\n\nUsage: vllm-router [OPTIONS]\n\nFor more information, try '--help'.\n"
	ce, err := routerlog.FindClapError(out)
	if err != nil {
		t.Fatal(err)
	}
	if ce.Kind != routerlog.ArgumentRepeated || ce.Flag != "--request-timeout-secs" || ce.Usage != "Usage: vllm-router [OPTIONS]" || ce.Value != "" {
		t.Errorf("%+v", ce)
	}
}

func TestClapUnderKubectlTimestamps(t *testing.T) {
	var stamped []string
	for _, l := range strings.Split(strings.TrimSuffix(clapTip, "\n"), "\n") {
		stamped = append(stamped, "2026-12-02T15:45:01.123456789Z "+l)
	}
	ce, err := routerlog.FindClapError(strings.Join(stamped, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ce.Value != "roundrobin" || len(ce.PossibleValues) != 6 || len(ce.Tips) != 1 || strings.Contains(ce.Text, "2026") {
		t.Errorf("%+v", ce)
	}
}

func TestClapOtherKinds(t *testing.T) {
	ce, _ := routerlog.FindClapError("error: unexpected argument '--queue-size' found\n\n  tip: to pass '--queue-size' as a value, use '-- --queue-size'\n")
	if ce.Kind != routerlog.UnknownArgument || ce.Flag != "--queue-size" || len(ce.Tips) != 0 {
		t.Errorf("%+v", ce)
	}
	ce, _ = routerlog.FindClapError("error: a value is required for '--policy <POLICY>' but none was supplied\n")
	if ce.Kind != routerlog.MissingValue || ce.Flag != "--policy" {
		t.Errorf("%+v", ce)
	}
	ce, _ = routerlog.FindClapError("error: something new\n")
	if ce.Kind != routerlog.OtherError || ce.Message != "something new" {
		t.Errorf("%+v", ce)
	}
}

func TestNoClapError(t *testing.T) {
	_, err := routerlog.FindClapError(vrStartup(vrBanner("Regular { worker_urls: [] }", "RoundRobin", "Nixl")))
	if err == nil || !strings.Contains(err.Error(), "Starting router on") {
		t.Errorf("err = %v", err)
	}
}

func FuzzFindBanner(f *testing.F) {
	f.Add(vrStartup(vrBanner("Regular { worker_urls: [] }", cacheAware, "Nixl")))
	f.Add(sgBanner("Manual { eviction_interval_secs: 120, max_idle_secs: 14400 }"))
	f.Add(vrBanner(`VllmPrefillDecode { prefill_urls: [("http://a:8000", Some(8998))], decode_urls: [], prefill_policy: None, decode_policy: None, discovery_address: None }`, "RoundRobin", "MoriIO"))
	f.Add("Starting router on  | mode:  | policy: ")
	f.Add("Starting router on x | policy: A | policy: B | mode: C")
	f.Add("\x1b[\x1b]\x1b")
	f.Add(clapTip)
	f.Add(clapNoTip)
	f.Fuzz(func(t *testing.T, logs string) {
		if b, err := routerlog.FindBanner(logs); err == nil {
			if b.Policy.TypeName() == "" && b.Policy.Kind == 0 && b.Policy.Text == "" {
				t.Fatalf("banner without a policy: %+v", b)
			}
			_ = b.Policy.String()
		} else {
			_ = err.Error()
		}
		if ce, err := routerlog.FindClapError(logs); err == nil {
			if ce.Kind == "" {
				t.Fatal("clap error without a kind")
			}
		}
		if s := ansi.Strip(logs); strings.Count(s, "\n") != strings.Count(logs, "\n") {
			t.Fatalf("ansi.Strip changed the line count")
		}
	})
}
