package sglang

import (
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
)

// SGLang 0.5.18 checks the length first (TokenizerManager._validate_one_request),
// then SamplingParams.verify; a ValueError from it is a flat 400
// BadRequestError on the OpenAI routes (OpenAIServingBase) and
// {"error":{"message"}} on /generate.
func TestSGLangSamplingValidationMatchesVerify(t *testing.T) {
	e := start(t, nil, nil)
	chat := func(extra string) string { return enginetest.ChatBody(model, "hi", extra) }
	for _, tc := range []struct {
		name, path, body string
		typ, msg         string
	}{
		{"temperature < 0", "/v1/chat/completions", chat(`,"temperature":-1`), "BadRequestError", "temperature must be a non-negative finite number, got -1.0."},
		{"top_p 0", "/v1/chat/completions", chat(`,"top_p":0`), "BadRequestError", "top_p must be in (0, 1], got 0.0."},
		{"top_k 0", "/v1/completions", `{"prompt":"hi","top_k":0}`, "BadRequestError", "top_k must be -1 (disable) or at least 1, got 0."},
		{"repetition_penalty 3", "/v1/chat/completions", chat(`,"repetition_penalty":3`), "BadRequestError", "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3.0."},
		{"min_tokens over max_tokens", "/v1/chat/completions", chat(`,"max_tokens":2,"min_tokens":3`), "BadRequestError", "min_new_tokens must be in [0, max_new_tokens(2)], got 3."},
		{"negative max_tokens", "/v1/chat/completions", chat(`,"max_tokens":-2`), "BadRequestError", "max_new_tokens must be at least 0, got -2."},
		{"completion max_tokens 0", "/v1/completions", `{"prompt":"hi","max_tokens":0}`, "Bad Request", "max_tokens must be positive"},
		{"wrong type", "/v1/chat/completions", chat(`,"temperature":"hot"`), "Bad Request", "'type': 'float_parsing', 'loc': ('body', 'temperature')"},
	} {
		code, resp := post(t, e, tc.path, tc.body)
		msg, _ := resp["message"].(string)
		if code != 400 || resp["object"] != "error" || resp["type"] != tc.typ || resp["code"] != 400.0 || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %v\nwant 400 %s containing %q", tc.name, code, resp, tc.typ, tc.msg)
		}
	}
	// temperature 0 is greedy: top_k becomes 1, so top_k 0 passes.
	if code, resp := post(t, e, "/v1/chat/completions", chat(`,"temperature":0,"top_k":0,"max_tokens":2`)); code != 200 {
		t.Errorf("greedy with top_k 0: %d %v", code, resp)
	}
	// A chat max_tokens of 0 is falsy: no limit.
	if code, resp := post(t, e, "/v1/chat/completions", chat(`,"max_tokens":0`)); code != 200 || usageCount(t, resp, "completion_tokens") != 16 {
		t.Errorf("chat max_tokens 0: %d %v", code, resp)
	}
	// /generate's sampling_params stay a dict: a JSON integer prints as one.
	for body, want := range map[string]string{
		`{"text":"hi","sampling_params":{"top_p":2}}`:   "top_p must be in (0, 1], got 2.",
		`{"text":"hi","sampling_params":{"top_p":2.0}}`: "top_p must be in (0, 1], got 2.0.",
	} {
		code, resp := post(t, e, "/generate", body)
		er, _ := resp["error"].(map[string]any)
		if code != 400 || er["message"] != want {
			t.Errorf("/generate %s: %d %v", body, code, resp)
		}
	}
}
