package vllm

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
)

// vLLM 0.29.0 answers n > 1 with n choices: the chat and completion full
// generators index them in order and count the prompt once and every
// choice's tokens (vllm/entrypoints/openai/chat_completion/serving.py,
// completion/serving.py).
func TestVLLMNChoicesNonStreamed(t *testing.T) {
	e := start(t, nil, nil)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		body := enginetest.ChatBody(model, "hello there", `,"n":3,"max_tokens":4`)
		if path == "/v1/completions" {
			body = idsPrompt(ids(500, 20), `,"n":3,"max_tokens":4`)
		}
		code, _, resp := post(t, e, path, body)
		if code != 200 {
			t.Fatalf("%s: %d %v", path, code, resp)
		}
		choices := resp["choices"].([]any)
		if len(choices) != 3 {
			t.Fatalf("%s: %d choices, want 3", path, len(choices))
		}
		for i, c := range choices {
			c := c.(map[string]any)
			if c["index"] != float64(i) || c["finish_reason"] != "length" {
				t.Fatalf("%s: choice %d = %v", path, i, c)
			}
		}
		u := usageOf(t, resp)
		p := u["prompt_tokens"].(float64)
		if u["completion_tokens"] != float64(12) || u["total_tokens"] != p+12 {
			t.Fatalf("%s: usage %v, want 3×4 completion tokens and the prompt once", path, u)
		}
	}
}

// Streamed, every choice gets its role chunk before any content (chat), its
// content chunks and its own final chunk; the usage chunk sums the choices'
// tokens; continuous usage counts the chunk's own choice.
func TestVLLMNChoicesStreamed(t *testing.T) {
	e := start(t, nil, nil)
	const n, m = 2, 3
	for _, chat := range []bool{true, false} {
		path, body := "/v1/completions", idsPrompt(ids(700, 20), fmt.Sprintf(`,"n":%d,"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}`, n, m))
		if chat {
			path, body = "/v1/chat/completions", enginetest.ChatBody(model, "stream two", fmt.Sprintf(`,"n":%d,"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}`, n, m))
		}
		events := e.Events(t, path, body)
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("%s: no [DONE]: %v", path, events)
		}
		roles, content := map[int]int{}, map[int]int{}
		finishes := map[int]string{}
		var usage map[string]any
		for k, ev := range events[:len(events)-1] {
			var c struct {
				Choices []struct {
					Index        int            `json:"index"`
					Delta        map[string]any `json:"delta"`
					FinishReason *string        `json:"finish_reason"`
					Text         *string        `json:"text"`
				} `json:"choices"`
				Usage map[string]any `json:"usage"`
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil {
				t.Fatal(err)
			}
			if len(c.Choices) == 0 {
				usage = c.Usage
				continue
			}
			if len(c.Choices) != 1 {
				t.Fatalf("%s: chunk with %d choices", path, len(c.Choices))
			}
			ch := c.Choices[0]
			if ch.Delta["role"] != nil {
				roles[ch.Index]++
				if k >= n {
					t.Fatalf("%s: role chunk %d after content: %v", path, k, events)
				}
				continue
			}
			content[ch.Index]++
			if c.Usage["completion_tokens"] != float64(content[ch.Index]) {
				t.Fatalf("%s: continuous usage %v on choice %d's chunk %d", path, c.Usage, ch.Index, content[ch.Index])
			}
			if ch.FinishReason != nil {
				finishes[ch.Index] = *ch.FinishReason
			}
		}
		for i := range n {
			if chat && roles[i] != 1 {
				t.Fatalf("%s: choice %d had %d role chunks", path, i, roles[i])
			}
			if content[i] != m || finishes[i] != "length" {
				t.Fatalf("%s: choice %d: %d chunks, finish %q", path, i, content[i], finishes[i])
			}
		}
		if usage == nil || usage["completion_tokens"] != float64(n*m) {
			t.Fatalf("%s: usage chunk %v, want %d completion tokens", path, usage, n*m)
		}
	}
}

// The engine counts each child as a request (request_success_total, token
// counters and per-request histograms), request_params_n and
// request_max_num_generation_tokens once per parent
// (vllm/v1/engine/parallel_sampling.py observe_finished_request), and the
// later children find the first child's prompt blocks cached
// (KVCacheManager.allocate_slots caches them at allocation).
func TestVLLMNChildrenCountAsRequests(t *testing.T) {
	e := start(t, nil, nil)
	const n, p, m = 3, 40, 4
	before := e.Scrape(t)
	if code, _, resp := post(t, e, "/v1/completions", idsPrompt(ids(3000, p), fmt.Sprintf(`,"n":%d,"max_tokens":%d`, n, m))); code != 200 {
		t.Fatalf("%d %v", code, resp)
	}
	after := e.Scrape(t)
	delta := func(name string) float64 { return value(t, after, name) - value(t, before, name) }
	for name, want := range map[string]float64{
		"vllm:request_success_total":                       n,
		"vllm:e2e_request_latency_seconds_count":           n,
		"vllm:time_to_first_token_seconds_count":           n,
		"vllm:request_time_per_output_token_seconds_count": n,
		"vllm:prompt_tokens_total":                         n * p,
		"vllm:generation_tokens_total":                     n * m,
		"vllm:request_prompt_tokens_sum":                   n * p,
		"vllm:request_params_max_tokens_sum":               n * m,
		"vllm:request_params_n_count":                      1,
		"vllm:request_params_n_sum":                        n,
		"vllm:request_max_num_generation_tokens_count":     1,
		"vllm:request_max_num_generation_tokens_sum":       m,
		"vllm:prefix_cache_queries_total":                  n * p,
		"vllm:prefix_cache_hits_total":                     (n - 1) * 32, // 16·floor(39/16) per later child
	} {
		if got := delta(name); got != want {
			t.Errorf("%s rose by %v, want %v", name, got, want)
		}
	}
}

// SamplingParams._verify_args and _verify_greedy_sampling
// (vllm/sampling_params.py): n at least 1, at most VLLM_MAX_N_SEQUENCES,
// and 1 under greedy sampling; every one a 400 BadRequestError, param null.
func TestVLLMNValidation(t *testing.T) {
	e := start(t, nil, map[string]string{"VLLM_MAX_N_SEQUENCES": "8"})
	for _, c := range []struct{ extra, msg string }{
		{`,"n":0`, "n must be at least 1, got 0."},
		{`,"n":9`, "n must be at most 8, got 9. To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable."},
		{`,"n":2,"temperature":0`, "n must be 1 when using greedy sampling, got 2."},
	} {
		code, _, resp := post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "x", c.extra))
		errBody, _ := resp["error"].(map[string]any)
		if code != 400 || errBody["type"] != "BadRequestError" || errBody["message"] != c.msg || errBody["param"] != nil {
			t.Errorf("%s: %d %v, want 400 %q", c.extra, code, resp, c.msg)
		}
	}
	if code, _, resp := post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "x", `,"n":8,"temperature":0.5,"max_tokens":1`)); code != 200 || len(resp["choices"].([]any)) != 8 {
		t.Errorf("n=8 at the limit: %d %v", code, resp)
	}
}
