package vllm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

func choice0(t *testing.T, resp map[string]any) map[string]any {
	t.Helper()
	cs, _ := resp["choices"].([]any)
	if len(cs) != 1 {
		t.Fatalf("choices in %v", resp)
	}
	return cs[0].(map[string]any)
}

// streamed joins a stream's chat deltas (or completion texts) and returns
// the last choice-carrying chunk.
func streamed(t *testing.T, events []string) (string, map[string]any) {
	t.Helper()
	var text strings.Builder
	var last map[string]any
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("chunk %q: %v", ev, err)
		}
		cs, _ := c["choices"].([]any)
		if len(cs) == 0 {
			continue
		}
		ch := cs[0].(map[string]any)
		if d, ok := ch["delta"].(map[string]any); ok {
			s, _ := d["content"].(string)
			text.WriteString(s)
		} else {
			s, _ := ch["text"].(string)
			text.WriteString(s)
		}
		last = ch
	}
	return text.String(), last
}

// The case: max_tokens ends an ignore_eos request, so vLLM reports
// "length" (check_stop: num_output_tokens >= max_tokens).
func TestVLLMIgnoreEOSWithMaxTokensEndsInLength(t *testing.T) {
	e := start(t, nil, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	_, _, resp := post(t, e, "/v1/chat/completions", chatBody("hi", `,"ignore_eos":true,"max_tokens":5`))
	ch := choice0(t, resp)
	if ch["finish_reason"] != "length" || ch["stop_reason"] != nil || usageOf(t, resp)["completion_tokens"] != 5.0 {
		t.Fatalf("non-streaming: %v", resp)
	}
	text, last := streamed(t, e.Events(t, "/v1/chat/completions", chatBody("hi", `,"ignore_eos":true,"max_tokens":5,"stream":true`)))
	if last["finish_reason"] != "length" || text != " The sky is a map" {
		t.Fatalf("streaming: %q %v", text, last)
	}
}

// Without max_tokens a chat's limit is what the context window leaves, so
// ignore_eos runs to it; a completion's max_tokens defaults to 16 (absent or
// null).
func TestVLLMIgnoreEOSWithoutMaxTokensRunsToTheDefaultLimit(t *testing.T) {
	e := start(t, []string{"--max-model-len", "64"}, nil)
	_, _, resp := post(t, e, "/v1/chat/completions", chatBody("hi", `,"ignore_eos":true`))
	p := usageOf(t, resp)["prompt_tokens"].(float64)
	if ch := choice0(t, resp); ch["finish_reason"] != "length" || usageOf(t, resp)["completion_tokens"] != 64-p {
		t.Fatalf("chat: %v", resp)
	}
	for _, extra := range []string{"", `,"max_tokens":null`} {
		_, _, resp = post(t, e, "/v1/completions", idsPrompt(ids(10, 20), `,"ignore_eos":true`+extra))
		if ch := choice0(t, resp); ch["finish_reason"] != "length" || usageOf(t, resp)["completion_tokens"] != 16.0 {
			t.Fatalf("completion%s: %v", extra, resp)
		}
	}
	f := e.Scrape(t)
	if got := value(t, f, "vllm:request_params_max_tokens_sum"); got != 64-p+32 {
		t.Fatalf("request_params_max_tokens_sum %v, want the computed limits %v", got, 64-p+32)
	}
}

func TestVLLMStopStringSetsStopReasonAndTrimsTheText(t *testing.T) {
	e := start(t, nil, nil)
	_, _, resp := post(t, e, "/v1/chat/completions", chatBody("hi", `,"stop":[" is"]`))
	ch := choice0(t, resp)
	if ch["finish_reason"] != "stop" || ch["stop_reason"] != " is" || ch["message"].(map[string]any)["content"] != " The sky" || usageOf(t, resp)["completion_tokens"] != 3.0 {
		t.Fatalf("stop list: %v", resp)
	}
	_, _, resp = post(t, e, "/v1/completions", `{"prompt":"hi","stop":" is","include_stop_str_in_output":true}`)
	ch = choice0(t, resp)
	if ch["finish_reason"] != "stop" || ch["stop_reason"] != " is" || ch["text"] != " The sky is" {
		t.Fatalf("stop string kept: %v", resp)
	}
	// The stop string completes on the token max_tokens would end on: stop.
	_, _, resp = post(t, e, "/v1/completions", `{"prompt":"hi","stop":" is","max_tokens":3}`)
	if ch = choice0(t, resp); ch["finish_reason"] != "stop" || ch["stop_reason"] != " is" {
		t.Fatalf("stop on the last allowed token: %v", resp)
	}
	text, last := streamed(t, e.Events(t, "/v1/chat/completions", chatBody("hi", `,"stop":[" is"],"stream":true`)))
	if text != " The sky" || last["finish_reason"] != "stop" || last["stop_reason"] != " is" {
		t.Fatalf("streaming: %q %v", text, last)
	}
	text, last = streamed(t, e.Events(t, "/v1/completions", `{"prompt":"hi","stop":[" is"],"stream":true}`))
	if text != " The sky" || last["finish_reason"] != "stop" || last["stop_reason"] != " is" {
		t.Fatalf("completion streaming: %q %v", text, last)
	}
	// The end-of-sequence token is a stop with stop_reason null.
	_, _, resp = post(t, e, "/v1/chat/completions", chatBody("hi", ""))
	if ch = choice0(t, resp); ch["finish_reason"] != "stop" || ch["stop_reason"] != nil {
		t.Fatalf("EOS: %v", resp)
	}
	f := e.Scrape(t)
	if value(t, f, "vllm:request_success_total", "finished_reason", "stop") != 6 {
		t.Fatal("stop-string finishes not counted as stop")
	}
}

func TestVLLMStopTokenIDSetsAnIntegerStopReason(t *testing.T) {
	e := start(t, nil, nil)
	id := tokenize.TokenID(1)
	_, _, resp := post(t, e, "/v1/completions", `{"prompt":"hi","ignore_eos":true,"max_tokens":8,"stop_token_ids":[`+jsonInt(int(id))+`]}`)
	ch := choice0(t, resp)
	if ch["finish_reason"] != "stop" || ch["stop_reason"] != float64(id) || ch["text"] != " The" || usageOf(t, resp)["completion_tokens"] != 2.0 {
		t.Fatalf("%v", resp)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// continuous_usage_stats puts the running usage on every chunk, the role
// chunk's with 0 completion tokens; --enable-force-include-usage turns on
// both include_usage and continuous usage (should_include_usage).
func TestVLLMContinuousUsageStats(t *testing.T) {
	check := func(name string, events []string) {
		t.Helper()
		var last float64 = -1
		for i, ev := range events[:len(events)-2] { // then the usage chunk and [DONE]
			var c struct {
				Usage *struct {
					Prompt     float64  `json:"prompt_tokens"`
					Completion float64  `json:"completion_tokens"`
					Total      float64  `json:"total_tokens"`
					Details    *float64 `json:"completion_tokens_details"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil || c.Usage == nil {
				t.Fatalf("%s: chunk %d has no usage: %s", name, i, ev)
			}
			if c.Usage.Completion != last+1 || c.Usage.Total != c.Usage.Prompt+c.Usage.Completion || !strings.Contains(ev, `"completion_tokens_details":null`) {
				t.Fatalf("%s: chunk %d usage %s after %v", name, i, ev, last)
			}
			last = c.Usage.Completion
		}
		if !strings.Contains(events[len(events)-2], `"choices":[]`) || events[len(events)-1] != "[DONE]" {
			t.Fatalf("%s: tail %v", name, events[len(events)-2:])
		}
	}
	e := start(t, nil, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	check("stream_options", e.Events(t, "/v1/chat/completions", chatBody("hi", `,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}`)))
	if ev := e.Events(t, "/v1/chat/completions", chatBody("hi", `,"stream":true,"stream_options":{"continuous_usage_stats":true}`)); strings.Contains(strings.Join(ev, "\n"), `"usage"`) {
		t.Fatalf("continuous_usage_stats without include_usage: %v", ev)
	}
	forced := start(t, []string{"--enable-force-include-usage"}, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	check("forced", forced.Events(t, "/v1/chat/completions", chatBody("hi", `,"stream":true`)))
}

// Non-streaming responses are model_dump()s of 0.29.0's response models:
// every field, nulls included, in declaration order.
func TestVLLMResponseFieldsAreThe029Models(t *testing.T) {
	e := start(t, nil, nil)
	_, _, b, err := e.Post("/v1/chat/completions", chatBody("hi", `,"max_tokens":2`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"token_ids":null,"routed_experts":null}]`, `"prompt_tokens_details":null,"completion_tokens_details":null}`, `"prompt_token_ids":null,"prompt_text":null,"kv_transfer_params":null,"ec_transfer_params":null,"metrics":null}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chat response lacks %s: %s", want, b)
		}
	}
	_, _, b, _ = e.Post("/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	for _, want := range []string{`"prompt_token_ids":null,"routed_experts":null}]`, `"kv_transfer_params":null,"ec_transfer_params":null,"metrics":null}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("completion response lacks %s: %s", want, b)
		}
	}
}
