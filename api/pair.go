package api

import (
	"fmt"
	"slices"
	"strings"
)

// Pair is a router in front of an engine: the unit the suite qualifies.
type Pair struct {
	Router string `json:"router"`
	Engine string `json:"engine"`
}

// String is the pair as reports and expect.yaml write it: vllm-router+vLLM.
func (p Pair) String() string { return p.Router + "+" + p.Engine }

// Slug is a DNS-label form for object names: vllm-router-vllm.
func (p Pair) Slug() string { return p.Router + "-" + strings.ToLower(p.Engine) }

// Admitted reports whether the operator accepts this router in front of
// this engine.
func (p Pair) Admitted() bool { return Fronts(p.Router, p.Engine) }

// ParsePair reads "router+engine".
func ParsePair(s string) (Pair, error) {
	r, e, ok := strings.Cut(s, "+")
	if !ok || r == "" || e == "" {
		return Pair{}, fmt.Errorf("pair %q must be written <router>+<engine>, e.g. %s+%s", s, RouterVLLM, EngineVLLM)
	}
	return Pair{Router: r, Engine: e}, nil
}

// Fronting is one row of the operator's router/engine table.
type Fronting struct {
	Router string
	// Engines are the engines the router fronts, in the order the webhook's
	// refusal lists them.
	Engines []string
}

// Matrix is the operator's router/engine compatibility table (webhook
// modelDeploymentRouterEngines, docs/operator.md#router-and-engine-compatibility), in report order. It is the
// one copy the suite, the config, the fixtures and the kube target read;
// the sim operator keeps its own as the emulated webhook's, and a test
// there checks that the two agree. Adding a router is a row here.
var Matrix = []Fronting{
	{Router: RouterVLLM, Engines: []string{EngineVLLM}},
	{Router: RouterSGLang, Engines: []string{EngineSGLang}},
	{Router: RouterLLMD, Engines: []string{EngineVLLM, EngineSGLang}},
}

// EnginesOf lists the engines router fronts (nil for an unknown router).
func EnginesOf(router string) []string {
	for _, f := range Matrix {
		if f.Router == router {
			return f.Engines
		}
	}
	return nil
}

// Fronts reports whether the operator admits router in front of engine.
func Fronts(router, engine string) bool { return slices.Contains(EnginesOf(router), engine) }

// Pairs lists every pair the operator admits, in Matrix order.
func Pairs() []Pair {
	var out []Pair
	for _, f := range Matrix {
		for _, e := range f.Engines {
			out = append(out, Pair{Router: f.Router, Engine: e})
		}
	}
	return out
}
