package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/config"
)

// The run's projection sits beside what it measured, and the framework's
// edits and the guard's fallback are in the environment block, in every
// rendering and in report.json.
func TestTheProjectionAndTheEditsAreInTheEnvironment(t *testing.T) {
	r := syntheticReport(t)
	r.SpecReports[1].ReportEntries = append(r.SpecReports[1].ReportEntries,
		remote(t, entry(RouterEdit{Claim: "roundrobin", Pair: "vllm-router+vLLM", Deployment: "shared-vllm-router-vllm",
			To: []string{"--policy", "round_robin"}, OldRouters: []string{"u1"}, NewRouters: []string{"u2"}, EnginesKept: true, Seconds: 12})),
		remote(t, entry(RouterEdit{Claim: "badpolicy", Pair: "vllm-router+vLLM", Deployment: "shared-vllm-router-vllm",
			To: []string{"--policy", "roundrobin"}, Refused: true, NewRouters: []string{"u2"}, EnginesKept: false,
			Replaced: []string{"md-server-0 UID a -> b"}})),
		remote(t, entry(EditGuard{Pair: "vllm-router+vLLM", Line: "edit guard: editing spec.router.extraArgs of ns/md replaced engine Pods (md-server-0 UID a -> b)"})))
	m := metaFor(t, config.TargetKube)
	m.Projection = &CostProjection{Model: "engine start-up 3m0s per engine Pod", ModelDeployments: 2, EnginePods: 4, RouterEdits: 3,
		Processes: 2, PeakAcceleratorsPerProcess: 2, PeakAccelerators: 4, GPUMinutesLoading: 12, GPUMinutesReady: 30, WallMinutes: 20}
	q := build(t, r, m)
	if e := q.Environment.Edits; e.Edits != 3 || e.EnginesReplaced != 1 || !strings.HasPrefix(e.Fallback, "edit guard: ") {
		t.Errorf("edits %+v", e)
	}
	md := Markdown(q)
	for _, want := range []string{
		"| Projected cost | 2 ModelDeployments, 4 engine Pods, 3 router edits; peak 2 accelerators per process, 4 with 2 processes; 42 GPU-minutes (12 loading, 30 Ready); about 20 minutes — from the cost model: engine start-up 3m0s per engine Pod |",
		"| Projected vs measured | projected 2 ModelDeployments and 4 engine Pods; measured 2 ModelDeployments, 5 engine Pods, 1 GPU-minutes Ready (projected 30) |",
		"| Router-argument edits | 3 (spec.router.extraArgs edited on a shared deployment; engine Pods replaced by 1) |",
		"| Edit guard | edit guard: editing spec.router.extraArgs of ns/md replaced engine Pods (md-server-0 UID a -> b) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	b, _ := json.Marshal(q.Environment)
	for _, want := range []string{`"projected":{"model":"engine start-up 3m0s per engine Pod"`, `"edits":{"edits":3,"enginesReplaced":1,"fallback":"edit guard: `} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report.json environment lacks %s:\n%s", want, b)
		}
	}
}
