package sglang

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
)

func TestSGLangAnswersEveryRouteAsItsTableSays(t *testing.T) {
	e := start(t, nil, nil)
	enginetest.CheckRoutes(t, e, &Routes, slices.Collect(maps.Keys(handlers)))
	code, _, body := e.Do(t, "GET", "/")
	if code != 200 || body != `"SGLang is running"` {
		t.Errorf("GET / answered %d %s", code, body)
	}
	code, _, body = e.Do(t, "POST", "/v1/tokenize")
	if code != 501 || !strings.Contains(body, `"object":"error"`) || !strings.Contains(body, `"code":501`) {
		t.Errorf("a route SGLang has but the sim does not emulate: %d %s", code, body)
	}
}

// The --api-key middleware runs before routing: a path no route serves is
// 401 without the key; /health* and /metrics* pass; the scheme is
// case-insensitive (utils/auth.py decide_request_auth).
func TestSGLangAPIKeyIsCheckedBeforeRouting(t *testing.T) {
	e := start(t, []string{"--api-key", "k"}, nil)
	if code, _, body := e.Do(t, "POST", "/nope"); code != 401 || body != `{"error":"Unauthorized"}` {
		t.Errorf("unknown path without the key: %d %s", code, body)
	}
	if code, _, _ := e.Do(t, "GET", "/health"); code != 200 {
		t.Errorf("/health without the key: %d", code)
	}
	if code, _, _ := e.Do(t, "GET", "/metrics"); code != 200 {
		t.Errorf("/metrics without the key: %d", code)
	}
	if code, _ := post(t, e, "/v1/chat/completions", enginetest.ChatBody(model, "hi", `,"max_tokens":1`), "Authorization", "bearer k"); code != 200 {
		t.Errorf("lower-case bearer: %d", code)
	}
}
