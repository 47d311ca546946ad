package routetext

import (
	"encoding/json"
	"testing"
)

func body(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestVRChatRoutesOnSessionIDOrEmpty(t *testing.T) {
	if got := VRChat(body(t, `{"messages":[{"role":"user","content":"hello"}]}`)); got != "" {
		t.Fatalf("got %q", got)
	}
	if got := VRChat(body(t, `{"messages":[],"session_params":{"session_id":"s-1"}}`)); got != "s-1" {
		t.Fatalf("got %q", got)
	}
	if got := VRChat(body(t, `{"session_params":{"session_id":7}}`)); got != "" {
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
		b := body(t, in)
		got := VRGenerate(b)
		if _, ok := b["text"]; !ok {
			if _, ok := b["input_ids"]; !ok {
				got = VRPrompt(b["prompt"])
			}
		}
		if got != want {
			t.Errorf("%s: got %q want %q", in, got, want)
		}
	}
}

func TestSGChatJoinsAllMessageTexts(t *testing.T) {
	b := body(t, `{"messages":[
		{"role":"system","content":"sys"},
		{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]},
		{"role":"assistant","content":"ans","reasoning_content":"why"},
		{"role":"user","content":""},
		{"role":"tool","content":"out","tool_call_id":"1"}]}`)
	if got := SGChat(b); got != "sys a b ans why out" {
		t.Fatalf("got %q", got)
	}
	if got := SGPDChat(b); got != "sys" {
		t.Fatalf("pd got %q", got)
	}
}

func TestSGPromptForms(t *testing.T) {
	if SGPrompt([]any{"a", "b"}) != "a b" || SGPDPrompt([]any{"a", "b"}) != "a" || SGPrompt("x") != "x" {
		t.Fatal("prompt forms")
	}
	if got := SGGenerate(body(t, `{"input_ids":[[1,2],[3]]}`)); got != "1 2 3" {
		t.Fatalf("got %q", got)
	}
}
