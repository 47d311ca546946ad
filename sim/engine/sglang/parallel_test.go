package sglang

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
)

// SGLang 0.5.18 serves n > 1 as a batch: a prefix-caching request with
// max_new_tokens 0, then n requests (tokenizer_manager.py
// _handle_batch_request), every one counted in the tokenizer's metrics;
// the response's choices are in order, its id the first choice's rid, its
// usage the choices' completion tokens summed and the first choice's
// prompt and cached tokens (usage_processor.py calculate_response_usage).
func TestSGLangNChoicesNonStreamed(t *testing.T) {
	e := start(t, []string{"--enable-cache-report"}, nil)
	const n, p, m = 3, 40, 4
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		body := fmt.Sprintf(`{"model":%q,"prompt":%s,"n":%d,"max_tokens":%d}`, model, ids(4000, p), n, m)
		if path == "/v1/chat/completions" {
			body = enginetest.ChatBody(model, "three choices", fmt.Sprintf(`,"n":%d,"max_tokens":%d`, n, m))
		}
		before := e.Scrape(t)
		code, resp := post(t, e, path, body)
		if code != 200 {
			t.Fatalf("%s: %d %v", path, code, resp)
		}
		after := e.Scrape(t)
		choices := resp["choices"].([]any)
		if len(choices) != n {
			t.Fatalf("%s: %d choices", path, len(choices))
		}
		for i, c := range choices {
			if c.(map[string]any)["index"] != float64(i) {
				t.Fatalf("%s: choice %d: %v", path, i, c)
			}
		}
		u := resp["usage"].(map[string]any)
		prompt := u["prompt_tokens"].(float64)
		if u["completion_tokens"] != float64(n*m) || u["total_tokens"] != prompt+n*m {
			t.Fatalf("%s: usage %v", path, u)
		}
		// The children find the prefix request's prompt in the radix cache.
		details, _ := u["prompt_tokens_details"].(map[string]any)
		if details == nil || details["cached_tokens"] != prompt-1 {
			t.Fatalf("%s: prompt_tokens_details %v, want %v cached", path, details, prompt-1)
		}
		d := func(name string) float64 { return val(after, name) - val(before, name) }
		if d("sglang:num_requests_total") != n+1 || d("sglang:prompt_tokens_total") != (n+1)*prompt || d("sglang:generation_tokens_total") != n*m {
			t.Fatalf("%s: requests +%v prompt +%v generation +%v, want the prefix request and %d children", path,
				d("sglang:num_requests_total"), d("sglang:prompt_tokens_total"), d("sglang:generation_tokens_total"), n)
		}
		if d("sglang:cached_tokens_total") < n*(prompt-1) {
			t.Fatalf("%s: cached +%v", path, d("sglang:cached_tokens_total"))
		}
	}
}

// Streamed, chunks carry each choice's index and its own rid as id; a
// chat choice's role chunk comes with its first output, and the finish
// chunks of all choices come after every content chunk
// (serving_chat.py _generate_chat_stream).
func TestSGLangNChoicesStreamed(t *testing.T) {
	e := start(t, nil, nil)
	const n, m = 2, 3
	for _, chat := range []bool{true, false} {
		path := "/v1/completions"
		body := fmt.Sprintf(`{"model":%q,"prompt":%s,"n":%d,"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, model, ids(6000, 20), n, m)
		if chat {
			path = "/v1/chat/completions"
			body = enginetest.ChatBody(model, "stream two", fmt.Sprintf(`,"n":%d,"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}`, n, m))
		}
		events := e.Events(t, path, body)
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("%s: %v", path, events)
		}
		idOf := map[int]string{}
		finishes, lastContent, firstFinish := map[int]string{}, -1, len(events)
		var usage map[string]any
		for k, ev := range events[:len(events)-1] {
			var c struct {
				ID      string `json:"id"`
				Choices []struct {
					Index        int            `json:"index"`
					Delta        map[string]any `json:"delta"`
					FinishReason *string        `json:"finish_reason"`
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
			ch := c.Choices[0]
			if ch.FinishReason != nil {
				finishes[ch.Index] = *ch.FinishReason
				firstFinish = min(firstFinish, k)
				if !chat {
					if idOf[ch.Index] != c.ID {
						t.Fatalf("%s: choice %d's chunks change id", path, ch.Index)
					}
				}
				continue
			}
			if ch.Delta != nil && ch.Delta["content"] != "" {
				lastContent = k
			}
			if !chat {
				lastContent = k
			}
			if id, seen := idOf[ch.Index]; seen && id != c.ID {
				t.Fatalf("%s: choice %d's chunks change id", path, ch.Index)
			}
			idOf[ch.Index] = c.ID
		}
		if len(idOf) != n || idOf[0] == idOf[1] {
			t.Fatalf("%s: ids per choice %v, want %d distinct rids", path, idOf, n)
		}
		if len(finishes) != n || (chat && firstFinish < lastContent) {
			t.Fatalf("%s: finishes %v (first at %d, last content at %d)", path, finishes, firstFinish, lastContent)
		}
		if usage == nil || usage["completion_tokens"] != float64(n*m) {
			t.Fatalf("%s: usage %v", path, usage)
		}
	}
}

// n < 1 is no batch: one choice. The usage stride range(0, len, n) then
// fails for n = 0 (a ValueError: 400 "BadRequest" after the generation)
// and skips the prompt for a negative n.
func TestSGLangNBelowOne(t *testing.T) {
	e := start(t, nil, nil)
	before := e.Scrape(t)
	code, resp := post(t, e, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%s,"n":0,"max_tokens":2}`, model, ids(100, 10)))
	if code != 400 || resp["type"] != "BadRequest" || resp["message"] != "range() arg 3 must not be zero" {
		t.Fatalf("n=0: %d %v", code, resp)
	}
	if d := val(e.Scrape(t), "sglang:num_requests_total") - val(before, "sglang:num_requests_total"); d != 1 {
		t.Fatalf("n=0: num_requests_total +%v, want the generation counted", d)
	}
	code, resp = post(t, e, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%s,"n":-1,"max_tokens":2}`, model, ids(100, 10)))
	u, _ := resp["usage"].(map[string]any)
	if code != 200 || len(resp["choices"].([]any)) != 1 || u["prompt_tokens"] != float64(0) || u["completion_tokens"] != float64(2) {
		t.Fatalf("n=-1: %d %v", code, resp)
	}
}
