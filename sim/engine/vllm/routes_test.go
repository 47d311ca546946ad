package vllm

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
)

func TestVLLMAnswersEveryRouteAsItsTableSays(t *testing.T) {
	e := start(t, nil, nil)
	enginetest.CheckRoutes(t, e, &Routes, slices.Collect(maps.Keys(handlers)))
	// HEAD is a GET route's method too (Starlette adds it).
	if code, _, _ := e.Do(t, "HEAD", "/health"); code != 200 {
		t.Errorf("HEAD /health answered %d", code)
	}
	code, _, body := e.Do(t, "POST", "/v1/responses")
	if code != 501 || !strings.Contains(body, `"type":"NotImplementedError"`) || !strings.Contains(body, `"code":501`) {
		t.Errorf("a route vLLM has but the sim does not emulate: %d %s", code, body)
	}
}

func TestVLLMStartupLogListsTheServedRoutes(t *testing.T) {
	e := start(t, nil, nil)
	out := e.Stdout.String()
	for _, want := range []string{"Route: /health, Methods: GET", "Route: /ping, Methods: POST, GET", "Route: /v1/chat/completions/render, Methods: POST"} {
		if !strings.Contains(out, want) {
			t.Errorf("start-up log lacks %q", want)
		}
	}
	if strings.Contains(out, "Route: /v1/responses") {
		t.Error("start-up log lists a route the sim does not serve")
	}
}

// The --api-key middleware runs before routing and guards /v1, /v2,
// /inference and /cohere (serve/middleware/authenticate.py).
func TestVLLMAPIKeyIsCheckedBeforeRouting(t *testing.T) {
	e := start(t, []string{"--api-key", "k"}, nil)
	for _, p := range []string{"/v1/nope", "/v2/rerank", "/inference/v1/generate"} {
		if code, _, body := e.Do(t, "POST", p); code != 401 || body != `{"error":"Unauthorized"}` {
			t.Errorf("POST %s without the key: %d %s", p, code, body)
		}
	}
	if code, _, _ := e.Do(t, "POST", "/nope"); code != 404 {
		t.Errorf("an unguarded unknown path: %d", code)
	}
	if code, _, _ := post(t, e, "/v1/chat/completions", chatBody("hi", ""), "Authorization", "bearer k"); code != 200 {
		t.Errorf("a lower-case bearer scheme: %d", code)
	}
}
