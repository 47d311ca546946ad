package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// A sim run with upstream routers says so in the headline, the Target
// line, a Router code line per pair and report.json; an emulated run
// names its emulations per pair and keeps its headline.
func TestReportSaysWhichRouterCodeRan(t *testing.T) {
	up := func(pkg, version string, checked bool) *clusters.RouterCode {
		return &clusters.RouterCode{Implementation: clusters.RouterUpstream, Package: pkg, Version: version,
			File: pkg + ".whl", SHA256: "2f26", HashChecked: checked, Workers: "a static list"}
	}
	emulated := &clusters.RouterCode{Implementation: clusters.RouterEmulated, Emulates: "llm-d-router v0.10.0 epp + envoy"}
	pairs := []clusters.PairSupport{
		{Pair: api.Pair{Router: api.RouterVLLM, Engine: api.EngineVLLM}, Supported: true, RouterCode: up("vllm-router", "0.1.15", true)},
		{Pair: api.Pair{Router: api.RouterSGLang, Engine: api.EngineSGLang}, Supported: true, RouterCode: up("sglang-router", "0.3.2", false)},
		{Pair: api.Pair{Router: api.RouterLLMD, Engine: api.EngineVLLM}, Supported: true, RouterCode: emulated},
		{Pair: api.Pair{Router: api.RouterVLLM, Engine: api.EngineSGLang}, Reason: "not fronted"},
	}
	m := meta(t)
	m.Environment.Pairs = pairs
	q := build(t, syntheticReport(t), m)
	if want := "Routing conformance on the simulator with upstream routers (vllm-router 0.1.15, sglang-router 0.3.2, not hash-checked): "; !strings.HasPrefix(q.Headline, want) {
		t.Errorf("headline %q, want it to start %q", q.Headline, want)
	}
	block := map[string]string{}
	for _, r := range q.Environment.Block {
		block[r.Name] = r.Value
	}
	for name, want := range map[string]string{
		"Target":                             "the routers marked upstream run their own code from PyPI",
		"Router code, vllm-router+vLLM":      "upstream vllm-router 0.1.15 (vllm-router.whl, sha256 2f26, hash-checked); workers: a static list",
		"Router code, sglang-gateway+SGLang": "upstream sglang-router 0.3.2 (sglang-router.whl, sha256 2f26, not hash-checked",
		"Router code, llm-d-router+vLLM":     "emulated (llm-d-router v0.10.0 epp + envoy)",
	} {
		if !strings.Contains(block[name], want) {
			t.Errorf("environment %q = %q, want it to contain %q", name, block[name], want)
		}
	}
	if _, ok := block["Router code, vllm-router+SGLang"]; ok {
		t.Error("an unsupported pair has a Router code line")
	}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"routerCode":[{"pair":"vllm-router+vLLM","implementation":"upstream","package":"vllm-router","version":"0.1.15","file":"vllm-router.whl","sha256":"2f26","hashChecked":true`,
		`{"pair":"llm-d-router+vLLM","implementation":"emulated","emulates":"llm-d-router v0.10.0 epp + envoy"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report.json lacks %s", want)
		}
	}

	m.Environment.Pairs = []clusters.PairSupport{{Pair: pairs[0].Pair, Supported: true, RouterCode: emulated}}
	q = build(t, syntheticReport(t), m)
	if !strings.HasPrefix(q.Headline, "Routing conformance on the simulator: ") {
		t.Errorf("an emulated run's headline %q names upstream routers", q.Headline)
	}
}
