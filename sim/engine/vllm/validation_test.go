package vllm

import (
	"strings"
	"testing"
)

// vLLM 0.29.0's request checks after the model lookup: the renderer's
// length checks (vllm/renderers/params.py), then SamplingParams._verify_args
// (vllm/sampling_params.py); VLLMValidationError's text carries
// "(parameter=..., value=...)" and the body's param.
func TestVLLMSamplingValidationMatchesSamplingParams(t *testing.T) {
	e := start(t, []string{"--max-model-len", "64"}, nil)
	long := strings.Repeat("word ", 60) // 75 tokens of text
	for _, tc := range []struct {
		name, path, body string
		code             int
		typ, param, msg  string
	}{
		{"temperature < 0", "/v1/chat/completions", chatBody("hi", `,"temperature":-1`), 400, "BadRequestError", "temperature",
			"temperature must be non-negative, got -1.0. (parameter=temperature, value=-1.0)"},
		{"temperature > 2", "/v1/chat/completions", chatBody("hi", `,"temperature":2.5`), 400, "BadRequestError", "temperature",
			"temperature must be in [0, 2], got 2.5. (parameter=temperature, value=2.5)"},
		{"top_p 0", "/v1/completions", `{"prompt":"hi","top_p":0}`, 400, "BadRequestError", "top_p",
			"top_p must be in (0, 1], got 0.0. (parameter=top_p, value=0.0)"},
		{"top_p > 1", "/v1/chat/completions", chatBody("hi", `,"top_p":1.5`), 400, "BadRequestError", "top_p",
			"top_p must be in (0, 1], got 1.5. (parameter=top_p, value=1.5)"},
		{"n 0", "/v1/chat/completions", chatBody("hi", `,"n":0`), 400, "BadRequestError", "",
			"n must be at least 1, got 0."},
		{"max_tokens 0", "/v1/chat/completions", chatBody("hi", `,"max_tokens":0`), 400, "BadRequestError", "max_tokens",
			"max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)"},
		{"max_tokens -3", "/v1/completions", `{"prompt":"hi","max_tokens":-3}`, 400, "BadRequestError", "max_tokens",
			"max_tokens must be at least 1, got -3. (parameter=max_tokens, value=-3)"},
		{"min_tokens over max_tokens", "/v1/completions", `{"prompt":"hi","max_tokens":3,"min_tokens":5}`, 400, "BadRequestError", "",
			"min_tokens must be less than or equal to max_tokens=3, got 5."},
		{"top_k -2", "/v1/completions", `{"prompt":"hi","top_k":-2}`, 400, "BadRequestError", "",
			"top_k must be 0 (disable), or at least 1, got -2."},
		{"max_completion_tokens over max_model_len", "/v1/chat/completions", chatBody("hi", `,"max_completion_tokens":65`), 400, "BadRequestError", "max_completion_tokens",
			"max_completion_tokens=65 cannot be greater than max_model_len=max_total_tokens=64. Please request fewer output tokens. (parameter=max_completion_tokens, value=65)"},
		{"token prompt over the window", "/v1/completions", idsPrompt(ids(1, 60), `,"max_tokens":10`), 400, "BadRequestError", "input_tokens",
			"This model's maximum context length is 64 tokens. However, you requested 10 output tokens and your prompt contains 60 input tokens, for a total of 70 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=60)"},
		{"text prompt cut at max_input+1", "/v1/completions", `{"prompt":"` + long + `","max_tokens":10}`, 400, "BadRequestError", "input_tokens",
			"your prompt contains at least 55 input tokens, for a total of at least 65 tokens."},
		{"wrong type", "/v1/chat/completions", chatBody("hi", `,"temperature":"hot"`), 400, "Bad Request", "body.temperature",
			"'type': 'float_parsing', 'loc': 'body.temperature', 'msg': 'Input should be a valid number, unable to parse string as a number'"},
		{"unknown model before sampling", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}],"temperature":-1}`, 404, "NotFoundError", "model",
			"The model `gpt-4` does not exist."},
	} {
		code, _, resp := post(t, e, tc.path, tc.body)
		er, _ := resp["error"].(map[string]any)
		msg, _ := er["message"].(string)
		param, _ := er["param"].(string)
		if code != tc.code || er["type"] != tc.typ || er["code"] != float64(tc.code) || param != tc.param || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %v\nwant %d %s param %q containing %q", tc.name, code, resp, tc.code, tc.typ, tc.param, tc.msg)
		}
	}
	// ChatCompletionRequest.model is optional: the first served name answers.
	code, _, resp := post(t, e, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	if code != 200 || resp["model"] != model {
		t.Errorf("no model: %d %v", code, resp)
	}
	// Numeric strings pass pydantic's lax mode.
	if code, _, resp = post(t, e, "/v1/chat/completions", chatBody("hi", `,"temperature":"0.5","max_tokens":"2"`)); code != 200 {
		t.Errorf("numeric strings: %d %v", code, resp)
	}
}

func TestVLLMTokenizeChecksTheModel(t *testing.T) {
	e := start(t, nil, nil)
	code, _, resp := post(t, e, "/tokenize", `{"model":"gpt-4","prompt":"hi"}`)
	if er, _ := resp["error"].(map[string]any); code != 404 || er["type"] != "NotFoundError" || er["param"] != "model" {
		t.Fatalf("unknown model: %d %v", code, resp)
	}
	code, _, resp = post(t, e, "/tokenize", `{"model":"`+model+`","prompt":"hi there"}`)
	if code != 200 || resp["count"] != 2.0 || resp["max_model_len"] == nil || len(resp["tokens"].([]any)) != 2 {
		t.Fatalf("tokenize: %d %v", code, resp)
	}
}
