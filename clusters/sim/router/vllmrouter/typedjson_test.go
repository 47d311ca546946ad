package vllmrouter

import (
	"bytes"
	"encoding/json"
	"testing"
)

func decodeNumbers(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The P/D router routes on, and forwards, the typed request as serde_json
// writes it: every defaulted field, f32 fields widened, keys sorted. The
// wants are what the vllm-router 0.1.15 wheel sent its prefill worker for
// these requests (less the kv_transfer_params the prefill leg adds, which
// the routing text does not carry).
func TestTypedRequestIsWhatTheWheelSerialises(t *testing.T) {
	for _, tc := range []struct{ route, in, want string }{
		{"/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":1}`,
			`{"add_generation_prompt":true,"continue_final_message":false,"ignore_eos":false,"include_reasoning":true,"logprobs":false,"max_tokens":1,"messages":[{"content":"hello","role":"user"}],"model":"m","no_stop_trim":false,"return_hidden_states":false,"separate_reasoning":true,"skip_special_tokens":true,"stream":false,"stream_reasoning":true}`},
		{"/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":1,"temperature":0.7,"top_p":1,"seed":3,"foo":1.0,"bar":"<a&b>` + "\u2028" + `"}`,
			`{"add_generation_prompt":true,"bar":"<a&b>` + "\u2028" + `","continue_final_message":false,"foo":1.0,"ignore_eos":false,"include_reasoning":true,"logprobs":false,"max_tokens":1,"messages":[{"content":"hello","role":"user"}],"model":"m","no_stop_trim":false,"return_hidden_states":false,"seed":3,"separate_reasoning":true,"skip_special_tokens":true,"stream":false,"stream_reasoning":true,"temperature":0.699999988079071,"top_p":1.0}`},
		{"/v1/completions",
			`{"model":"m","prompt":"hello","max_tokens":1,"temperature":1e-7}`,
			`{"echo":false,"ignore_eos":false,"max_tokens":1,"model":"m","no_stop_trim":false,"prompt":"hello","return_hidden_states":false,"skip_special_tokens":true,"stream":false,"temperature":1.0000000116860974e-7}`},
	} {
		if got := serdeString(typedRequest(tc.route, decodeNumbers(t, tc.in))); got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.route, tc.in, got, tc.want)
		}
	}
	// Other routes keep the client's fields.
	if got := serdeString(typedRequest("/generate", decodeNumbers(t, `{"text":"x"}`))); got != `{"text":"x"}` {
		t.Errorf("generate: %s", got)
	}
}
