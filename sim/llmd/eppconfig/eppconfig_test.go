package eppconfig_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/llmd/eppconfig"
	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
)

func TestStringRendersWeightsWithTwoDecimalsAndSlicesWithSpaces(t *testing.T) {
	w := 2.0
	cfg := eppconfig.EndpointPickerConfig{
		Plugins:            []eppconfig.PluginSpec{{Name: "a", Type: "queue-scorer"}, {Type: "x", Parameters: json.RawMessage(`{"k":1}`)}},
		SchedulingProfiles: []eppconfig.SchedulingProfile{{Name: "p", Plugins: []eppconfig.SchedulingPlugin{{PluginRef: "a", Weight: &w}, {PluginRef: "b"}}}},
		FeatureGates:       eppconfig.FeatureGates{"flowControl=false", "x"},
	}
	want := `{FeatureGates: {flowControl=false,x}, Plugins: [{Name: a, Type: queue-scorer} {Type: x, Parameters: {"k":1}}], ` +
		`SchedulingProfiles: [{Name: p, Plugins: [{PluginRef: a, Weight: 2.00} {PluginRef: b}]}]}`
	if got := cfg.String(); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

func TestDefaultConfigIsQueue2KV2Prefix3(t *testing.T) {
	var logs bytes.Buffer
	cfg, gates, err := eppconfig.LoadRaw(nil, zaplog.NewSink(&logs, 0).Logger())
	if err != nil {
		t.Fatal(err)
	}
	if gates["flowControl"] || !gates["haPopulateNonLeaderDatastore"] {
		t.Errorf("registered gate defaults: %v", gates)
	}
	got := cfg.SchedulingProfiles[0].String()
	if got != "{Name: default, Plugins: [{PluginRef: queue-scorer, Weight: 2.00} {PluginRef: kv-cache-utilization-scorer, Weight: 2.00} {PluginRef: prefix-cache-scorer, Weight: 3.00}]}" {
		t.Errorf("default profile: %s", got)
	}
	if !strings.Contains(logs.String(), `"msg":"A configuration wasn't specified. A default one is being used."`) ||
		!strings.Contains(logs.String(), `"msg":"Default raw configuration used"`) {
		t.Errorf("default-config lines:\n%s", logs.String())
	}
}

func TestDecodeIsStrictAndAcceptsTheDeprecatedGroupWithAWarning(t *testing.T) {
	if _, err := eppconfig.Decode([]byte("apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: []\nprofiles: []\n")); err == nil ||
		err.Error() != `failed to decode configuration JSON/YAML: strict decoding error: unknown field "profiles"` {
		t.Fatalf("unknown field: %v", err)
	}
	var logs bytes.Buffer
	_, _, err := eppconfig.LoadRaw([]byte("apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins: []\nschedulingProfiles: []\n"),
		zaplog.NewSink(&logs, 0).Logger())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"msg":"DEPRECATION: apiVersion inference.networking.x-k8s.io/v1alpha1/EndpointPickerConfig is deprecated","replacement":"llm-d.ai/v1alpha1/EndpointPickerConfig"`) {
		t.Fatalf("deprecation line:\n%s", logs.String())
	}
	if _, _, err := eppconfig.LoadRaw([]byte("apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nfeatureGates: [warpDrive]\nplugins: []\nschedulingProfiles: []\n"),
		zaplog.NewSink(&bytes.Buffer{}, 0).Logger()); err == nil || err.Error() != "feature gate validation failed: feature gate 'warpDrive' is unknown or unregistered" {
		t.Fatalf("gate: %v", err)
	}
}

// stub plugins for the loader's system defaults.
type stub struct{ tn fw.TypedName }

func (s stub) TypedName() fw.TypedName { return s.tn }

type stubScorer struct{ stub }

func (stubScorer) Score(context.Context, *fw.Request, []*fw.Endpoint) map[*fw.Endpoint]float64 {
	return nil
}

type stubPicker struct{ stub }

func (stubPicker) Pick(context.Context, []*fw.ScoredEndpoint) *fw.ProfileResult { return nil }

type stubHandler struct{ stub }

func (stubHandler) Pick(context.Context, *fw.Request, map[string]fw.Profile, map[string]*fw.ProfileResult) map[string]fw.Profile {
	return nil
}
func (stubHandler) ProcessResults(context.Context, *fw.Request, map[string]*fw.ProfileResult) (*fw.SchedulingResult, error) {
	return nil, nil
}

type stubParser struct{ stub }

func (stubParser) Paths() []string { return nil }

type stubSource struct{ stub }

func (stubSource) DataSource() {}

func factories() map[string]eppconfig.Factory {
	out := map[string]eppconfig.Factory{}
	add := func(typ string, f func(fw.TypedName) fw.Plugin) {
		out[typ] = func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return f(fw.TypedName{Type: typ, Name: name}), nil
		}
	}
	for _, typ := range []string{"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"} {
		add(typ, func(tn fw.TypedName) fw.Plugin { return stubScorer{stub{tn}} })
	}
	add("max-score-picker", func(tn fw.TypedName) fw.Plugin { return stubPicker{stub{tn}} })
	add("single-profile-handler", func(tn fw.TypedName) fw.Plugin { return stubHandler{stub{tn}} })
	for _, typ := range []string{"openai-parser", "anthropic-parser", "vllmhttp-parser"} {
		add(typ, func(tn fw.TypedName) fw.Plugin { return stubParser{stub{tn}} })
	}
	add("metrics-data-source", func(tn fw.TypedName) fw.Plugin { return stubSource{stub{tn}} })
	for _, typ := range []string{"core-metrics-extractor", "fcfs-ordering-policy", "global-strict-fairness-policy", "static-usage-limit-policy", "utilization-detector"} {
		add(typ, func(tn fw.TypedName) fw.Plugin { return stub{tn} })
	}
	return out
}

func TestInstantiateInjectsHandlerPickerParsersAndDefaultWeight(t *testing.T) {
	cfg, _, err := eppconfig.LoadRaw([]byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
schedulingProfiles:
- name: only
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: kv-cache-utilization-scorer
    weight: 0.5
`), zaplog.NewSink(&bytes.Buffer{}, 0).Logger())
	if err != nil {
		t.Fatal(err)
	}
	h := eppconfig.NewHandle(context.Background(), zaplog.NewSink(&bytes.Buffer{}, 0).Logger(), eppmetrics.New())
	l, err := eppconfig.Instantiate(cfg, factories(), h)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.SchedulingProfiles[0].String(); got != "{Name: only, Plugins: [{PluginRef: queue-scorer, Weight: 1.00} {PluginRef: kv-cache-utilization-scorer, Weight: 0.50} {PluginRef: max-score-picker}]}" {
		t.Errorf("weight 1.0 for an unweighted scorer, the picker appended: %s", got)
	}
	if l.Handler.TypedName().Type != "single-profile-handler" || len(l.Parsers) != 3 || len(l.Sources) != 1 {
		t.Errorf("handler %v parsers %d sources %d", l.Handler.TypedName(), len(l.Parsers), len(l.Sources))
	}
	if s := l.Profiles["only"].Scorers; len(s) != 2 || s[0].Weight != 1 || s[1].Weight != 0.5 {
		t.Errorf("weighted scorers: %+v", s)
	}
}

func TestTwoProfilesNeedAProfileHandler(t *testing.T) {
	cfg, _, _ := eppconfig.LoadRaw([]byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
schedulingProfiles:
- name: a
  plugins: [{pluginRef: queue-scorer}]
- name: b
  plugins: [{pluginRef: queue-scorer}]
`), zaplog.NewSink(&bytes.Buffer{}, 0).Logger())
	h := eppconfig.NewHandle(context.Background(), zaplog.NewSink(&bytes.Buffer{}, 0).Logger(), eppmetrics.New())
	if _, err := eppconfig.Instantiate(cfg, factories(), h); err == nil || err.Error() != "scheduler config build failed: no profile handler configured" {
		t.Fatalf("%v", err)
	}
}
