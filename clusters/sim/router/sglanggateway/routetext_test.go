package sglanggateway

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

func TestSGChatJoinsAllMessageTexts(t *testing.T) {
	b := jsonBody(t, `{"messages":[
		{"role":"system","content":"sys"},
		{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]},
		{"role":"assistant","content":"ans","reasoning_content":"why"},
		{"role":"user","content":""},
		{"role":"tool","content":"out","tool_call_id":"1"}]}`)
	if got := chatText(b); got != "sys a b ans why out" {
		t.Fatalf("got %q", got)
	}
	if got := pdChatText(b); got != "sys" {
		t.Fatalf("pd got %q", got)
	}
}

func TestSGPromptForms(t *testing.T) {
	if promptText([]any{"a", "b"}) != "a b" || pdPromptText([]any{"a", "b"}) != "a" || promptText("x") != "x" {
		t.Fatal("prompt forms")
	}
	if got := generateText(jsonBody(t, `{"input_ids":[[1,2],[3]]}`)); got != "1 2 3" {
		t.Fatalf("got %q", got)
	}
}
