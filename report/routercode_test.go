package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// A sim run names per pair the router code that ran: the build (binary,
// version, sdist and digest, pinned or not, patches) or the emulation, in
// the environment block and report.json; the headline says so only when a
// build is not the pins.
func TestReportSaysWhichRouterCodeRan(t *testing.T) {
	built := func(binary, pkg, version string, pinned bool, patches ...string) *clusters.RouterCode {
		return &clusters.RouterCode{Implementation: clusters.RouterBuilt, Binary: binary, Package: pkg, Version: version,
			File: pkg + "-" + version + ".tar.gz", SHA256: "af8e", HashChecked: pinned, Patches: patches}
	}
	emulated := &clusters.RouterCode{Implementation: clusters.RouterEmulated, Emulates: "llm-d-router v0.10.0 epp + envoy"}
	pairs := []clusters.PairSupport{
		{Pair: api.Pair{Router: api.RouterVLLM, Engine: api.EngineVLLM}, Supported: true, RouterCode: built("vllm-router", "vllm-router", "0.1.15", true)},
		{Pair: api.Pair{Router: api.RouterSGLang, Engine: api.EngineSGLang}, Supported: true,
			RouterCode: built("sgl-model-gateway", "sglang-router", "0.3.2", false, "0001-x.patch")},
		{Pair: api.Pair{Router: api.RouterLLMD, Engine: api.EngineVLLM}, Supported: true, RouterCode: emulated},
		{Pair: api.Pair{Router: api.RouterLLMD, Engine: api.EngineSGLang}, Supported: true, RouterCode: &clusters.RouterCode{
			Implementation: clusters.RouterBuilt, Binary: "epp", Package: "github.com/llm-d/llm-d-router", Version: "v0.10.0",
			Commit: "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26", SHA256: "da2a", Emulates: "envoy"}},
		{Pair: api.Pair{Router: api.RouterVLLM, Engine: api.EngineSGLang}, Reason: "not fronted"},
	}
	m := meta(t)
	m.Environment.Pairs = pairs
	q := build(t, syntheticReport(t), m)
	if want := "Routing conformance on the simulator with routers built from other than the pinned source (sgl-model-gateway 0.3.2, not hash-pinned, 1 patches): "; !strings.HasPrefix(q.Headline, want) {
		t.Errorf("headline %q, want it to start %q", q.Headline, want)
	}
	block := map[string]string{}
	for _, r := range q.Environment.Block {
		block[r.Name] = r.Value
	}
	for name, want := range map[string]string{
		"Target":                             "the routers marked built from source below run their own binaries as processes",
		"Router code, vllm-router+vLLM":      "built from source: vllm-router 0.1.15 (vllm-router, sdist vllm-router-0.1.15.tar.gz, sha256 af8e, hash-pinned)",
		"Router code, sglang-gateway+SGLang": "built from source: sgl-model-gateway 0.3.2 (sglang-router, sdist sglang-router-0.3.2.tar.gz, sha256 af8e, not hash-pinned: a version other than the pins); patches: 0001-x.patch",
		"Router code, llm-d-router+vLLM":     "emulated (llm-d-router v0.10.0 epp + envoy)",
		"Router code, llm-d-router+SGLang":   "built from source: github.com/llm-d/llm-d-router v0.10.0 @71f4f0999f95b96c49a9d0c4afbd18dfdb943c26 (epp, binary sha256 da2a); emulated beside it: envoy",
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
	for _, want := range []string{`"routerCode":[{"pair":"vllm-router+vLLM","implementation":"built from source","binary":"vllm-router","package":"vllm-router","version":"0.1.15","file":"vllm-router-0.1.15.tar.gz","sha256":"af8e","hashChecked":true`,
		`{"pair":"llm-d-router+vLLM","implementation":"emulated","emulates":"llm-d-router v0.10.0 epp + envoy"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report.json lacks %s", want)
		}
	}

	m.Environment.Pairs = pairs[:1]
	q = build(t, syntheticReport(t), m)
	if !strings.HasPrefix(q.Headline, "Routing conformance on the simulator: ") {
		t.Errorf("a run on the pinned builds has headline %q", q.Headline)
	}
}
