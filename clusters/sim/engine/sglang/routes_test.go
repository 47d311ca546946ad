package sglang

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/enginetest"
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
