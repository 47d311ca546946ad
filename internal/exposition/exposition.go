// Package exposition writes realistic Prometheus text pages shaped like the
// ones vLLM (prometheus_client, single process), SGLang (prometheus_client
// multiprocess), vllm-router and sgl-model-gateway (metrics-exporter-prometheus)
// serve, with the names, labels, HELP texts and layout from
// docs/engines.md and docs/routers.md. Tests of the assertions
// packages serve them from httptest servers.
package exposition

import (
	"fmt"
	"sort"
	"strings"
)

// VLLMFinishedReasons are the finished_reason values vLLM pre-creates.
var VLLMFinishedReasons = []string{"abort", "error", "length", "repetition", "stop"}

// VLLM is an engine page: every per-engine series exists from start-up (at 0),
// counters carry _total plus a _created gauge family, labels are sorted.
// success maps finished_reason to vllm:request_success_total.
func VLLM(model string, success map[string]int, running, waiting int, promptTokens, hits int) string {
	lbl := fmt.Sprintf(`engine="0",model_name=%q`, model)
	var b strings.Builder
	b.WriteString(`# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 10349.0
python_gc_objects_collected_total{generation="1"} 1911.0
python_gc_objects_collected_total{generation="2"} 123.0
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.2345344e+09
`)
	fmt.Fprintf(&b, `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{%[1]s} %[2]d.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{%[1]s} %[3]d.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{%[1]s} 0.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{%[1]s} %[4]d.0
# HELP vllm:prefix_cache_queries_created Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_created gauge
vllm:prefix_cache_queries_created{%[1]s} 1.7646912e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{%[1]s} %[5]d.0
# HELP vllm:prefix_cache_hits_created Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_created gauge
vllm:prefix_cache_hits_created{%[1]s} 1.7646912e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{%[1]s} %[4]d.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{%[1]s} 1.7646912e+09
`, lbl, running, waiting, promptTokens, hits)
	b.WriteString("# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\n")
	total := 0
	for _, r := range VLLMFinishedReasons {
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=%q,model_name=%q} %d.0\n", r, model, success[r])
		total += success[r]
	}
	b.WriteString("# HELP vllm:request_success_created Count of successfully processed requests.\n# TYPE vllm:request_success_created gauge\n")
	for _, r := range VLLMFinishedReasons {
		fmt.Fprintf(&b, "vllm:request_success_created{engine=\"0\",finished_reason=%q,model_name=%q} 1.7646912e+09\n", r, model)
	}
	b.WriteString("# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n# TYPE vllm:time_to_first_token_seconds histogram\n")
	for _, le := range []string{"0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf"} {
		n := total
		if le == "0.001" || le == "0.005" {
			n = 0 // TTFT of 5 ms lands above the first two bounds
		}
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=%q,model_name=%q} %d.0\n", le, model, n)
	}
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{%s} %d.0\n", lbl, total)
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{%s} %g\n", lbl, 0.0061*float64(total))
	fmt.Fprintf(&b, `# HELP vllm:time_to_first_token_seconds_created Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{%[1]s} 1.7646912e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="27306",prefix_caching_hash_algo="sha256"} 1.0
# HELP http_requests_total Total number of requests by method, status and handler.
# TYPE http_requests_total counter
http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} %[2]d.0
# HELP http_requests_created Total number of requests by method, status and handler.
# TYPE http_requests_created gauge
http_requests_created{handler="/v1/chat/completions",method="POST",status="2xx"} 1.7646913e+09
`, lbl, total)
	return b.String()
}

// SGLang is an engine page in multiprocess mode: no _created families, the
// tokenizer counters only after the first finished request (requests > 0;
// the warm-up request makes that true on a real server), a pid label on the
// gauges declared without multiprocess_mode.
func SGLang(model string, requests, promptTokens, cachedTokens, running int) string {
	sched := fmt.Sprintf(`engine_type="unified",model_name=%q,moe_ep_rank="0",pp_rank="0",tp_rank="0"`, model)
	tok := fmt.Sprintf(`engine_type="unified",model_name=%q`, model)
	var b strings.Builder
	fmt.Fprintf(&b, `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{%[1]s} %[2]d.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{%[1]s} 0.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{%[1]s} 0.01
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{%[1]s} 0.0
# HELP sglang:num_retracted_reqs The number of retracted requests.
# TYPE sglang:num_retracted_reqs gauge
sglang:num_retracted_reqs{%[1]s,pid="4711"} 0.0
`, sched, running)
	if requests > 0 {
		fmt.Fprintf(&b, `# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{%[1]s} %[2]d.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{%[1]s} %[3]d.0
# HELP sglang:num_requests_total The number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{%[1]s} %[4]d.0
`, tok, promptTokens, 16*requests, requests)
		if cachedTokens > 0 {
			fmt.Fprintf(&b, `# HELP sglang:cached_tokens_total Number of cached prompt tokens.
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",%[1]s} %[2]d.0
`, tok, cachedTokens)
		}
		fmt.Fprintf(&b, "# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds\n# TYPE sglang:e2e_request_latency_seconds histogram\n")
		for _, le := range []string{"0.1", "0.2", "0.4", "0.6", "0.8", "1.0", "2.0", "+Inf"} {
			fmt.Fprintf(&b, "sglang:e2e_request_latency_seconds_bucket{%s,le=%q} %d.0\n", tok, le, requests)
		}
		fmt.Fprintf(&b, "sglang:e2e_request_latency_seconds_count{%s} %d.0\nsglang:e2e_request_latency_seconds_sum{%s} %g\n", tok, requests, tok, 0.021*float64(requests))
	}
	return b.String()
}

// VLLMRouter is vllm-router's :9090 page (metrics-exporter-prometheus): names
// as written, integer values, a blank line between families, series only
// after first use. decisions maps worker URL to picks under policy.
func VLLMRouter(policy string, decisions map[string]int, activeWorkers int) string {
	workers := sortedKeys(decisions)
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP vllm_router_active_workers Number of currently active workers\n# TYPE vllm_router_active_workers gauge\nvllm_router_active_workers %d\n\n", activeWorkers)
	if len(workers) == 0 {
		return b.String()
	}
	b.WriteString("# HELP vllm_router_processed_requests_total Total requests processed by each worker\n# TYPE vllm_router_processed_requests_total counter\n")
	total := 0
	for _, w := range workers {
		fmt.Fprintf(&b, "vllm_router_processed_requests_total{worker=%q} %d\n", w, decisions[w])
		total += decisions[w]
	}
	b.WriteString("\n# HELP vllm_router_policy_decisions_total Total routing policy decisions by policy and worker\n# TYPE vllm_router_policy_decisions_total counter\n")
	for _, w := range workers {
		fmt.Fprintf(&b, "vllm_router_policy_decisions_total{policy=%q,worker=%q} %d\n", policy, w, decisions[w])
	}
	fmt.Fprintf(&b, "\n# HELP vllm_router_requests_total Total number of requests by route and method\n# TYPE vllm_router_requests_total counter\nvllm_router_requests_total{route=\"/v1/chat/completions\"} %d\n", total)
	b.WriteString("\n# HELP vllm_router_generate_duration_seconds Generate request duration\n# TYPE vllm_router_generate_duration_seconds histogram\n")
	for _, le := range []string{"0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "120", "240", "+Inf"} {
		n := total
		if le == "0.001" || le == "0.005" {
			n = 0
		}
		fmt.Fprintf(&b, "vllm_router_generate_duration_seconds_bucket{le=%q} %d\n", le, n)
	}
	fmt.Fprintf(&b, "vllm_router_generate_duration_seconds_sum %g\nvllm_router_generate_duration_seconds_count %d\n", 0.0223*float64(total), total)
	if policy == "cache_aware" {
		b.WriteString("\n# HELP vllm_router_running_requests Number of running requests per worker\n# TYPE vllm_router_running_requests gauge\n")
		for _, w := range workers {
			fmt.Fprintf(&b, "vllm_router_running_requests{worker=%q} 0\n", w)
		}
	}
	return b.String()
}

// SMG is sgl-model-gateway's :9090 page: smg_worker_selection_total has no
// worker label; smg_worker_requests_active exists only under cache_aware.
func SMG(policy, model string, selections int, workers []string) string {
	var b strings.Builder
	if selections > 0 {
		fmt.Fprintf(&b, `# HELP smg_router_requests_total Total requests by router_type, backend_type, connection_mode, model, endpoint, streaming
# TYPE smg_router_requests_total counter
smg_router_requests_total{router_type="http",backend_type="regular",connection_mode="http",model=%q,endpoint="chat",streaming="false"} %d

`, model, selections)
	}
	if selections > 0 && policy != "prefix_hash" { // prefix_hash over HTTP never selects a worker
		fmt.Fprintf(&b, `# HELP smg_worker_selection_total Worker selection events by worker_type, connection_mode, model, policy
# TYPE smg_worker_selection_total counter
smg_worker_selection_total{worker_type="regular",connection_mode="http",model=%q,policy=%q} %d

`, model, policy, selections)
	}
	b.WriteString("# HELP smg_worker_health Worker health status\n# TYPE smg_worker_health gauge\n")
	for _, w := range workers {
		fmt.Fprintf(&b, "smg_worker_health{worker=%q} 1\n", w)
	}
	if policy == "cache_aware" {
		b.WriteString("\n# HELP smg_worker_requests_active Currently running requests per worker\n# TYPE smg_worker_requests_active gauge\n")
		for _, w := range workers {
			fmt.Fprintf(&b, "smg_worker_requests_active{worker=%q} 0\n", w)
		}
	}
	if policy == "prefix_hash" {
		// Not described by the gateway, so a TYPE line and no HELP line.
		fmt.Fprintf(&b, "\n# TYPE smg_prefix_hash_policy_branch_total counter\nsmg_prefix_hash_policy_branch_total{branch=\"no_tokens\"} %d\n", selections)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
