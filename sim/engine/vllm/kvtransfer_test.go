package vllm

import (
	"testing"
)

const (
	consumerConfig = `{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}`
	producerConfig = `{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}`
	// What vllm-router 0.1.15 sends a decode engine once it knows the
	// prefill's engine id (vllm_pd_router.rs build_mooncake_decode_kv_transfer_params).
	routerDecodeParams = `,"kv_transfer_params":{"do_remote_decode":false,"do_remote_prefill":true,"transfer_id":"xfer-1","remote_bootstrap_addr":"http://10.0.0.9:8998","remote_engine_id":"e0"}`
	// What it sends every prefill engine (build_prefill_kv_transfer_params).
	routerPrefillParams = `,"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"transfer_id":"xfer-1"}`
)

// promptSplit is how one request's prompt moved a vLLM engine's counters.
type promptSplit struct {
	total, compute, localHit, external, extQueries, extHits, cached, kvComputed float64
}

// A decode engine (MooncakeConnector kv_consumer) given the router's
// remote-prefill params loads the whole prompt from the prefill engine:
// its tokens count as external_kv_transfer, not local compute, and as
// external prefix-cache hits; without params (the unpatched router under
// discovery sends none), with empty params, or with do_remote_prefill
// false it prefills locally, still asking the connector
// (vllm/v1/core/sched/scheduler.py, mooncake_connector.py
// get_num_new_matched_tokens).
func TestVLLMDecodeEngineRemotePrefill(t *testing.T) {
	e := start(t, []string{"--kv-transfer-config", consumerConfig, "--enable-prompt-tokens-details"}, nil)
	const p = 40
	cases := []struct {
		name   string
		params string
		remote bool
	}{
		{"router's params", routerDecodeParams, true},
		{"no params", "", false},
		{"null params", `,"kv_transfer_params":null`, false},
		{"empty params", `,"kv_transfer_params":{}`, false},
		{"do_remote_prefill false", `,"kv_transfer_params":{"do_remote_prefill":false,"transfer_id":"x","remote_bootstrap_addr":"http://a:1","remote_engine_id":"e"}`, false},
	}
	for i, c := range cases {
		before := e.Scrape(t)
		code, _, resp := post(t, e, "/v1/completions", idsPrompt(ids(20000+1000*i, p), `,"max_tokens":3`+c.params))
		if code != 200 {
			t.Fatalf("%s: %d %v", c.name, code, resp)
		}
		after := e.Scrape(t)
		d := func(name string, labels ...string) float64 {
			return value(t, after, name, labels...) - value(t, before, name, labels...)
		}
		ext := 0.0
		if c.remote {
			ext = p
		}
		got := promptSplit{
			total: d("vllm:prompt_tokens_total"), compute: d("vllm:prompt_tokens_by_source_total", "source", "local_compute"),
			localHit: d("vllm:prompt_tokens_by_source_total", "source", "local_cache_hit"), external: d("vllm:prompt_tokens_by_source_total", "source", "external_kv_transfer"),
			extQueries: d("vllm:external_prefix_cache_queries_total"), extHits: d("vllm:external_prefix_cache_hits_total"),
			cached: d("vllm:prompt_tokens_cached_total"), kvComputed: d("vllm:request_prefill_kv_computed_tokens_sum"),
		}
		want := promptSplit{total: p, compute: p - ext, external: ext, extQueries: p, extHits: ext, cached: ext, kvComputed: p - ext}
		if got != want {
			t.Errorf("%s: %+v, want %+v", c.name, got, want)
		}
		if d("vllm:request_success_total") != 1 || d("vllm:generation_tokens_total") != 3 {
			t.Errorf("%s: not counted as one request of 3 tokens", c.name)
		}
		details, _ := usageOf(t, resp)["prompt_tokens_details"].(map[string]any)
		if c.remote && (details == nil || details["cached_tokens"] != float64(p)) {
			t.Errorf("%s: prompt_tokens_details %v, want the transferred %d tokens as cached", c.name, details, p)
		}
		if resp["kv_transfer_params"] != nil {
			t.Errorf("%s: response kv_transfer_params %v, want null", c.name, resp["kv_transfer_params"])
		}
	}
}

// kv_transfer_params is dict[str, Any] | None in the request models: any
// other JSON is a 400 validation error.
func TestVLLMKVTransferParamsMustBeADict(t *testing.T) {
	e := start(t, nil, nil)
	code, _, resp := post(t, e, "/v1/completions", idsPrompt(ids(1, 5), `,"kv_transfer_params":"x"`))
	errBody, _ := resp["error"].(map[string]any)
	if code != 400 || errBody["type"] != "Bad Request" || errBody["param"] != "body.kv_transfer_params" {
		t.Fatalf("%d %v", code, resp)
	}
}

// A prefill engine (kv_producer) asked with do_remote_decode answers
// normally, its response's kv_transfer_params null: MooncakeConnector's
// request_finished keeps the blocks for the decode's pull and returns no
// params. It computes the prompt itself; an engine without a connector
// never moves the external prefix-cache counters.
func TestVLLMPrefillEngineAnswersNullKVTransferParams(t *testing.T) {
	const p = 30
	for _, c := range []struct {
		name       string
		args       []string
		extQueries float64
	}{
		{"producer", []string{"--kv-transfer-config", producerConfig}, p},
		{"no connector", nil, 0},
	} {
		e := start(t, c.args, nil)
		before := e.Scrape(t)
		code, _, resp := post(t, e, "/v1/completions", idsPrompt(ids(500, p), `,"max_tokens":1`+routerPrefillParams))
		if code != 200 || resp["kv_transfer_params"] != nil {
			t.Fatalf("%s: %d %v", c.name, code, resp)
		}
		after := e.Scrape(t)
		d := func(name string, labels ...string) float64 {
			return value(t, after, name, labels...) - value(t, before, name, labels...)
		}
		if d("vllm:prompt_tokens_by_source_total", "source", "local_compute") != p || d("vllm:external_prefix_cache_queries_total") != c.extQueries {
			t.Errorf("%s: local compute +%v, external queries +%v", c.name, d("vllm:prompt_tokens_by_source_total", "source", "local_compute"), d("vllm:external_prefix_cache_queries_total"))
		}
	}
}
