package sglang

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
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

func usageCount(t *testing.T, resp map[string]any, key string) float64 {
	t.Helper()
	u, _ := resp["usage"].(map[string]any)
	n, ok := u[key].(float64)
	if !ok {
		t.Fatalf("no usage.%s in %v", key, resp)
	}
	return n
}

// streamedText joins a stream's chat deltas and returns the last chunk whose
// choice has a finish_reason.
func streamedText(t *testing.T, events []string) (string, map[string]any) {
	t.Helper()
	var text strings.Builder
	var fin map[string]any
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
		if ch["finish_reason"] != nil {
			fin = ch
		}
	}
	return text.String(), fin
}

func TestSGLangIgnoreEOSEndsInLength(t *testing.T) {
	e := start(t, []string{"--context-length", "64"}, map[string]string{"SIM_ENGINE_OUTPUT_TOKENS": "3"})
	_, resp := post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"ignore_eos":true,"max_tokens":5`))
	ch := choice0(t, resp)
	if ch["finish_reason"] != "length" || ch["matched_stop"] != nil || usageCount(t, resp, "completion_tokens") != 5 {
		t.Fatalf("max_tokens 5: %v", resp)
	}
	// No max_tokens: the scheduler's cap, max_req_len - p - 1 with
	// max_req_len = context_len - 1.
	_, resp = post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"ignore_eos":true`))
	p := usageCount(t, resp, "prompt_tokens")
	if ch = choice0(t, resp); ch["finish_reason"] != "length" || usageCount(t, resp, "completion_tokens") != 64-1-p-1 {
		t.Fatalf("no max_tokens (prompt %v): %v", p, resp)
	}
	_, resp = post(t, e, "/generate", `{"input_ids":[1,2,3,4,5,6,7,8,9,10],"sampling_params":{"ignore_eos":true}}`)
	meta, _ := resp["meta_info"].(map[string]any)
	fr, _ := meta["finish_reason"].(map[string]any)
	if fr["type"] != "length" || meta["completion_tokens"] != 52.0 {
		t.Fatalf("/generate default max_new_tokens 128 capped at 64-1-10-1: %v", resp)
	}
}

func TestSGLangStopStringSetsMatchedStopAndTrims(t *testing.T) {
	e := start(t, nil, nil)
	_, resp := post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stop":[" is"]`))
	ch := choice0(t, resp)
	if ch["finish_reason"] != "stop" || ch["matched_stop"] != " is" || ch["message"].(map[string]any)["content"] != " The sky" || usageCount(t, resp, "completion_tokens") != 3 {
		t.Fatalf("stop: %v", resp)
	}
	_, resp = post(t, e, "/v1/completions", `{"prompt":"hi","stop":" is","no_stop_trim":true}`)
	if ch = choice0(t, resp); ch["matched_stop"] != " is" || ch["text"] != " The sky is" {
		t.Fatalf("no_stop_trim: %v", resp)
	}
	text, fin := streamedText(t, e.Events(t, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"stop":[" is"],"stream":true`)))
	if text != " The sky" || fin["finish_reason"] != "stop" || fin["matched_stop"] != " is" {
		t.Fatalf("streaming: %q %v", text, fin)
	}
	// The end-of-turn token: matched_stop is its id.
	_, resp = post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", ""))
	if ch = choice0(t, resp); ch["finish_reason"] != "stop" || ch["matched_stop"] != float64(tokenize.IMEnd) {
		t.Fatalf("EOS: %v", resp)
	}
	_, resp = post(t, e, "/generate", `{"text":"hi","sampling_params":{"stop":" is"}}`)
	meta, _ := resp["meta_info"].(map[string]any)
	fr, _ := meta["finish_reason"].(map[string]any)
	if fr["type"] != "stop" || fr["matched"] != " is" || resp["text"] != " The sky" {
		t.Fatalf("/generate: %v", resp)
	}
}

// SGLang drops every token-based stop under ignore_eos, stop_token_ids too
// (Req._check_token_based_finish).
func TestSGLangStopTokenIDs(t *testing.T) {
	e := start(t, nil, nil)
	id := tokenize.TokenID(1)
	body := func(extra string) string {
		b, _ := json.Marshal(id)
		return `{"prompt":"hi","max_tokens":8,"stop_token_ids":[` + string(b) + `]` + extra + `}`
	}
	_, resp := post(t, e, "/v1/completions", body(""))
	ch := choice0(t, resp)
	if ch["finish_reason"] != "stop" || ch["matched_stop"] != float64(id) || ch["text"] != " The" || usageCount(t, resp, "completion_tokens") != 2 {
		t.Fatalf("stop token: %v", resp)
	}
	_, resp = post(t, e, "/v1/completions", body(`,"ignore_eos":true`))
	if ch = choice0(t, resp); ch["finish_reason"] != "length" || usageCount(t, resp, "completion_tokens") != 8 {
		t.Fatalf("ignore_eos: %v", resp)
	}
}
