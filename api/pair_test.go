package api

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestPairsFollowTheOperatorTableInReportOrder(t *testing.T) {
	want := []Pair{
		{RouterVLLM, EngineVLLM}, {RouterSGLang, EngineSGLang},
		{RouterLLMD, EngineVLLM}, {RouterLLMD, EngineSGLang},
	}
	if got := Pairs(); !slices.Equal(got, want) {
		t.Errorf("Pairs() = %v, want %v", got, want)
	}
	for _, p := range want {
		if !p.Admitted() {
			t.Errorf("%s is not admitted", p)
		}
	}
	for _, p := range []Pair{{RouterVLLM, EngineSGLang}, {RouterSGLang, EngineVLLM}, {"tgi-router", EngineVLLM}} {
		if p.Admitted() {
			t.Errorf("%s is admitted", p)
		}
	}
}

func TestEveryRouterOfTheEnumHasARow(t *testing.T) {
	var rows []string
	for _, f := range Matrix {
		rows = append(rows, f.Router)
		for _, e := range f.Engines {
			if !slices.Contains(Engines, e) {
				t.Errorf("%s fronts %q, which is not an engine of the enum %v", f.Router, e, Engines)
			}
		}
	}
	for _, r := range Routers {
		if !slices.Contains(rows, r) {
			t.Errorf("router %s of the enum has no row in Matrix", r)
		}
	}
	if len(rows) != len(Routers) {
		t.Errorf("Matrix rows %v, enum %v", rows, Routers)
	}
}

func TestPairNamesParseAndJSON(t *testing.T) {
	p := Pair{Router: RouterLLMD, Engine: EngineSGLang}
	if p.String() != "llm-d-router+SGLang" || p.Slug() != "llm-d-router-sglang" {
		t.Errorf("%s %s", p, p.Slug())
	}
	back, err := ParsePair(p.String())
	if err != nil || back != p {
		t.Errorf("ParsePair = %v, %v", back, err)
	}
	if _, err := ParsePair("vllm-router"); err == nil {
		t.Error("ParsePair accepted a pair without +")
	}
	b, _ := json.Marshal(p)
	if string(b) != `{"router":"llm-d-router","engine":"SGLang"}` {
		t.Errorf("json %s", b)
	}
}
