package vllmrouter

import (
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routertest"
)

func TestVRChatRoutesOnSessionIDOrEmpty(t *testing.T) {
	if got := chatText(routertest.JSONBody(t, `{"messages":[{"role":"user","content":"hello"}]}`)); got != "" {
		t.Fatalf("got %q", got)
	}
	if got := chatText(routertest.JSONBody(t, `{"messages":[],"session_params":{"session_id":"s-1"}}`)); got != "s-1" {
		t.Fatalf("got %q", got)
	}
	if got := chatText(routertest.JSONBody(t, `{"session_params":{"session_id":7}}`)); got != "" {
		t.Fatalf("got %q", got)
	}
	// docs/routers.md#corrections: an id that trim() empties routes on "".
	for _, blank := range []string{`""`, `" "`, `"\t \n"`} {
		if got := chatText(routertest.JSONBody(t, `{"session_params":{"session_id":`+blank+`}}`)); got != "" {
			t.Errorf("session_id %s: got %q, want \"\"", blank, got)
		}
	}
	if got := chatText(routertest.JSONBody(t, `{"session_params":{"session_id":" s-2 "}}`)); got != " s-2 " {
		t.Errorf("padded id: got %q", got)
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
		b := routertest.JSONBody(t, in)
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
