package vllmrouter

import (
	"encoding/json"
	"testing"
)

func jsonBody(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestVRChatRoutesOnSessionIDOrEmpty(t *testing.T) {
	if got := chatText(jsonBody(t, `{"messages":[{"role":"user","content":"hello"}]}`)); got != "" {
		t.Fatalf("got %q", got)
	}
	if got := chatText(jsonBody(t, `{"messages":[],"session_params":{"session_id":"s-1"}}`)); got != "s-1" {
		t.Fatalf("got %q", got)
	}
	if got := chatText(jsonBody(t, `{"session_params":{"session_id":7}}`)); got != "" {
		t.Fatalf("got %q", got)
	}
}

func TestVRPromptForms(t *testing.T) {
	cases := map[string]string{
		`{"prompt":"abc"}`:          "abc",
		`{"prompt":["a","b"]}`:      "a b",
		`{"prompt":[1,2,3]}`:        "token_ids:3",
		`{"prompt":[[1,2],[3]]}`:    "token_ids_batch:2:3",
		`{"text":"t","prompt":"p"}`: "t",
		`{"input_ids":[5,6]}`:       "5 6",
	}
	for in, want := range cases {
		b := jsonBody(t, in)
		got := generateText(b)
		if _, ok := b["text"]; !ok {
			if _, ok := b["input_ids"]; !ok {
				got = promptText(b["prompt"])
			}
		}
		if got != want {
			t.Errorf("%s: got %q want %q", in, got, want)
		}
	}
}
