package sglanggateway

import (
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routertest"
)

func TestSGChatJoinsAllMessageTexts(t *testing.T) {
	b := routertest.JSONBody(t, `{"messages":[
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
	if got := generateText(routertest.JSONBody(t, `{"input_ids":[[1,2],[3]]}`)); got != "1 2 3" {
		t.Fatalf("got %q", got)
	}
}
