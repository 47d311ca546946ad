package assertions_test

import (
	"strings"
	"testing"

	. "github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/routerlog"
)

const cacheAware = "CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 }"

// banner is a log line as tracing-subscriber colours it.
func banner(target, rest string) string {
	return "\x1b[2m2026-12-02 15:45:01\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2m" + target + "\x1b[0m\x1b[2m:\x1b[0m \x1b[2msrc/server.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m828\x1b[0m\x1b[2m:\x1b[0m Starting router on 0.0.0.0:8081 | " + rest
}

func vrLogs(mode, policy, kv string) string {
	return "VLLM Router starting...\nHost: 0.0.0.0:8081\nMode: Regular (vllm)\nPolicy: cache_aware\n" +
		banner("vllm_router_rs::server", "mode: "+mode+" | policy: "+policy+" | kv_connector: "+kv+" | max_payload: 512MB") +
		"\nService discovery started\n"
}

func sgLogs(policy string) string {
	return "SGLang Router starting...\nMode: IGW (Inference Gateway)\n" +
		banner("smg::server", "mode: Regular { worker_urls: [] } | policy: "+policy+" | max_payload: 512MB") + "\n"
}

func TestHaveStartedWithPolicy(t *testing.T) {
	logs := vrLogs("Regular { worker_urls: [] }", cacheAware, "Nixl")
	mustPass(t, failure(logs, HaveStartedWithPolicy(cacheAware), false))
	// Spacing is free and numbers compare by value.
	mustPass(t, failure([]byte(logs), HaveStartedWithPolicy("CacheAware {cache_threshold: 0.30, balance_abs_threshold: 64.0, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864}"), false))
	mustPass(t, failure(sgLogs("RoundRobin"), HaveStartedWithPolicy("RoundRobin"), false))
	mustPass(t, failure(logs, HaveStartedWithPolicy("RoundRobin"), true))

	b, _ := routerlog.FindBanner(logs)
	mustPass(t, failure(b, HaveStartedWithPolicy(cacheAware), false))
}

func TestHaveStartedWithPolicyShowsTheBannerFound(t *testing.T) {
	msg := failure(sgLogs("RoundRobin"), HaveStartedWithPolicy("CacheAware { cache_threshold: 0.3 }"), false)
	mustContain(t, msg, "to show policy CacheAware { cache_threshold: 0.3 }, but policy is RoundRobin:",
		"line 3: 2026-12-02 15:45:01  INFO smg::server: src/server.rs:828: Starting router on 0.0.0.0:8081 | mode: Regular { worker_urls: [] } | policy: RoundRobin")
	if strings.Contains(msg, "\x1b") {
		t.Errorf("message keeps ANSI codes:\n%q", msg)
	}

	logs := vrLogs("Regular { worker_urls: [] }", cacheAware, "Nixl")
	msg = failure(logs, HaveStartedWithPolicy(strings.Replace(cacheAware, "0.3", "0.5", 1)), false)
	mustContain(t, msg, "policy.cache_threshold is 0.3, want 0.5")
	msg = failure(logs, HaveStartedWithPolicy(strings.Replace(cacheAware, "cache_threshold", "cache_thresold", 1)), false)
	mustContain(t, msg, "policy has no field cache_thresold (its fields: cache_threshold, balance_abs_threshold,",
		"policy has field cache_threshold: 0.3, which the expectation does not show")
	msg = failure(logs, HaveStartedWithPolicy("CacheAware { cache_threshold: 0.3 }"), false)
	mustContain(t, msg, "policy has field balance_abs_threshold: 64, which the expectation does not show")
	msg = failure(sgLogs("RoundRobin"), HaveStartedWithPolicy("RoundRobin { virtual_nodes: 160 }"), false)
	mustContain(t, msg, "policy RoundRobin has no fields, so no virtual_nodes")

	restarted := logs + vrLogs("Regular { worker_urls: [] }", "RoundRobin", "Nixl")
	mustContain(t, failure(restarted, HaveStartedWithPolicy(cacheAware), false), "the last of 2 banners", "policy is RoundRobin")
	mustContain(t, failure(restarted, HaveStartedWithPolicy("RoundRobin"), true), "not to show policy RoundRobin")
}

func TestHaveStartedInMode(t *testing.T) {
	const pd = "VllmPrefillDecode { prefill_urls: [], decode_urls: [], prefill_policy: Some(RoundRobin), decode_policy: Some(" + cacheAware + "), discovery_address: None }"
	logs := vrLogs(pd, cacheAware, "Mooncake")
	mustPass(t, failure(logs, HaveStartedInMode(pd), false))
	mustContain(t, failure(logs, HaveStartedInMode(strings.Replace(pd, "Some(RoundRobin)", "None", 1)), false),
		"to show mode VllmPrefillDecode", "mode.prefill_policy is Some(RoundRobin), want None")
	mustContain(t, failure(sgLogs("RoundRobin"), HaveStartedInMode(pd), false), "but mode is Regular")
	mustContain(t, failure("x", HaveStartedInMode("Regular {"), false), "the expected mode is not a Debug form")
}

func TestHaveStartedWithPolicyWithoutBannerShowsTheTail(t *testing.T) {
	logs := "DEBUG: parsed\n" + "error: invalid value 'roundrobin' for '--policy <POLICY>'\n  [possible values: random, round_robin]\n"
	for _, negate := range []bool{false, true} {
		msg := failure(logs, HaveStartedWithPolicy("RoundRobin"), negate)
		mustContain(t, msg, "no router startup banner", "3 log lines", "| error: invalid value 'roundrobin'")
	}
	mustContain(t, failure(42, HaveStartedWithPolicy("RoundRobin"), false), "log text")
	mustContain(t, failure("x", HaveStartedWithPolicy("CacheAware { cache_threshold: }"), false), "the expected policy is not a Debug form")
}

const (
	clapVR = "DEBUG: Parsed args\nerror: invalid value 'roundrobin' for '--policy <POLICY>'\n  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n\n  tip: a similar value exists: 'round_robin'\n\nFor more information, try '--help'.\n"
	clapSG = "error: invalid value 'consistent_hash' for '--policy <POLICY>'\n  [possible values: random, round_robin, cache_aware, power_of_two, prefix_hash, manual]\n\nFor more information, try '--help'.\n"
)

func TestHaveRefusedPolicyValue(t *testing.T) {
	vrValues := []string{"random", "round_robin", "cache_aware", "power_of_two", "consistent_hash", "rendezvous_hash"}
	mustPass(t, failure(clapVR, HaveRefusedPolicyValue("roundrobin", "--policy").WithPossibleValues(vrValues...).WithTip("round_robin"), false))
	mustPass(t, failure([]byte(clapSG), HaveRefusedPolicyValue("consistent_hash", "--policy").WithoutTip(), false))

	msg := failure(clapSG, HaveRefusedPolicyValue("consistent_hash", "--policy").WithPossibleValues(vrValues...), false)
	mustContain(t, msg, "the possible values are random, round_robin, cache_aware, power_of_two, prefix_hash, manual", "clap's output from line 1", "  | error: invalid value 'consistent_hash'")
	mustContain(t, failure(clapVR, HaveRefusedPolicyValue("roundrobin", "--policy").WithoutTip(), false), `without a tip, but clap offered ["round_robin"]`)
	mustContain(t, failure(clapSG, HaveRefusedPolicyValue("consistent_hash", "--policy").WithTip("round_robin"), false), `with tip "round_robin", but clap offered no similar value`)
	mustContain(t, failure(clapVR, HaveRefusedPolicyValue("roundrobin", "--policy").WithTip("random"), false), `with tip "random", but clap offered ["round_robin"]`)
	mustContain(t, failure(clapVR, HaveRefusedPolicyValue("round-robin", "--prefill-policy"), false), `it is about "--policy <POLICY>"`, `the refused value is "roundrobin"`)
	mustContain(t, failure(clapVR, HaveRefusedPolicyValue("roundrobin", "--policy"), true), "Expected not clap to refuse")

	// The whole argument as clap names it, and the documented wording.
	mustPass(t, failure(clapVR, HaveRefusedPolicyValue("roundrobin", "--policy <POLICY>").WithLines(
		"error: invalid value 'roundrobin' for '--policy <POLICY>'", "  tip: a similar value exists: 'round_robin'", "For more information, try '--help'."), false))
	mustContain(t, failure(clapSG, HaveRefusedPolicyValue("consistent_hash", "--policy").WithLines("For more information, try '--help'.", "  tip: a similar value exists: 'x'"), false),
		"in the 2 documented lines", `the block lacks the line "  tip: a similar value exists: 'x'"`)
	mustContain(t, failure(clapVR, HaveRefusedPolicyValue("roundrobin", "--policy <PREFILL_POLICY>"), false), `it is about "--policy <POLICY>"`)

	started := vrLogs("Regular { worker_urls: [] }", "RoundRobin", "Nixl")
	mustPass(t, failure(started, HaveRefusedPolicyValue("round_robin", "--policy"), true))
	mustContain(t, failure(started, HaveRefusedPolicyValue("round_robin", "--policy"), false), "no clap error", "Service discovery started")
}

// A wrong actual type is reported under the name of the matcher the caller used.
func TestClapMatcherNamesItselfInTypeErrors(t *testing.T) {
	if _, err := HaveRefusedPolicyValue("x", "--policy").Match(42); err == nil || !strings.Contains(err.Error(), "HaveRefusedPolicyValue") {
		t.Fatalf("error = %v, want it to name HaveRefusedPolicyValue", err)
	}
}

func TestHaveStartedWithBanner(t *testing.T) {
	logs := sgLogs("RoundRobin")
	mustPass(t, failure(logs, HaveStartedWithBanner("policy: RoundRobin"), false))
	mustContain(t, failure(logs, HaveStartedWithBanner("policy: Random"), false), "to show policy Random, but policy is RoundRobin")
	mustContain(t, failure(logs, HaveStartedWithBanner("RoundRobin"), false),
		`HaveStartedWithBanner: banner "RoundRobin" must be written "policy: <the policy as the router prints it>"`)
	if p, err := DocumentedPolicy("policy: " + cacheAware); err != nil || p != cacheAware {
		t.Errorf("DocumentedPolicy = %q, %v", p, err)
	}
}
