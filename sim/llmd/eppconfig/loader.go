package eppconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
	"github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
)

// Call sites of the loader's log lines in llm-d-router v0.10.0.
const (
	siteDeprecatedGroup  zaplog.Site = "loader/configloader.go:92"
	siteDeprecatedSatDet zaplog.Site = "loader/configloader.go:99"
	siteDeprecatedParser zaplog.Site = "loader/configloader.go:113"
	siteLoaded           zaplog.Site = "loader/configloader.go:124"
	siteNoConfig         zaplog.Site = "loader/configloader.go:126"
	siteDefaultUsed      zaplog.Site = "loader/configloader.go:128"
	siteEffective        zaplog.Site = "loader/configloader.go:164"
	siteNoSources        zaplog.Site = "loader/configloader.go:180"
	siteDeprecatedPlugin zaplog.Site = "loader/configloader.go:253"
	siteAutoCreated      zaplog.Site = "datalayer/data_graph.go:116"
)

// DefaultScorerWeight is the weight of a scorer referenced without one.
const DefaultScorerWeight = 1.0

// Factory builds a plugin from its name and strictly decoded parameters
// (params is nil when the config gives none), as fwkplugin.FactoryFunc.
type Factory func(name string, params *json.Decoder, h *Handle) (framework.Plugin, error)

// StrictDecoder is fwkplugin.StrictDecoder: nil for empty parameters,
// otherwise a decoder that rejects unknown fields.
func StrictDecoder(raw json.RawMessage) *json.Decoder {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec
}

// Handle is the plugin handle: the instantiated plugins by name (in
// instantiation order), the logger plugins log with and the metrics.
type Handle struct {
	Ctx     context.Context
	Log     zaplog.Logger
	Metrics *eppmetrics.Registry
	names   []string
	plugins map[string]framework.Plugin
}

// NewHandle returns an empty handle.
func NewHandle(ctx context.Context, log zaplog.Logger, m *eppmetrics.Registry) *Handle {
	return &Handle{Ctx: ctx, Log: log, Metrics: m, plugins: map[string]framework.Plugin{}}
}

// Plugin returns the plugin named name, or nil.
func (h *Handle) Plugin(name string) framework.Plugin { return h.plugins[name] }

// AddPlugin registers p under name.
func (h *Handle) AddPlugin(name string, p framework.Plugin) {
	if _, ok := h.plugins[name]; !ok {
		h.names = append(h.names, name)
	}
	h.plugins[name] = p
}

// Plugins returns every plugin in instantiation order.
func (h *Handle) Plugins() []framework.Plugin {
	out := make([]framework.Plugin, 0, len(h.names))
	for _, n := range h.names {
		out = append(out, h.plugins[n])
	}
	return out
}

// Names returns the plugin names in instantiation order.
func (h *Handle) Names() []string { return append([]string(nil), h.names...) }

// LoadRaw is LoadRawConfig: decode (or the built-in default when data is
// empty), migrate deprecated sections, log the raw config, apply the static
// defaults and check the feature gates.
func LoadRaw(data []byte, log zaplog.Logger) (*EndpointPickerConfig, map[string]bool, error) {
	var cfg *EndpointPickerConfig
	if len(data) != 0 {
		var err error
		if cfg, err = Decode(data); err != nil {
			return nil, nil, err
		}
		if cfg.Deprecated() {
			log.Info(siteDeprecatedGroup, "DEPRECATION: apiVersion inference.networking.x-k8s.io/v1alpha1/EndpointPickerConfig is deprecated",
				"replacement", "llm-d.ai/v1alpha1/EndpointPickerConfig")
		}
		if cfg.SaturationDetector != nil {
			log.Info(siteDeprecatedSatDet, "DEPRECATION: top-level saturationDetector is deprecated, use flowControl.saturationDetector instead. If both are set, the new field is used.")
			if cfg.FlowControl == nil {
				cfg.FlowControl = &FlowControlConfig{}
			}
			if cfg.FlowControl.SaturationDetector == nil {
				cfg.FlowControl.SaturationDetector = cfg.SaturationDetector
			}
		}
		if cfg.Parser != nil {
			log.Info(siteDeprecatedParser, "DEPRECATION: top-level parser is deprecated, use requestHandler.parsers instead. If both are set, the new field is used.")
			if cfg.RequestHandler == nil {
				cfg.RequestHandler = &RequestHandlerConfig{}
			}
			if len(cfg.RequestHandler.Parsers) == 0 {
				cfg.RequestHandler.Parsers = []ParserConfig{*cfg.Parser}
			}
		}
		log.Info(siteLoaded, "Loaded raw configuration", "config", cfg.String())
	} else {
		log.Info(siteNoConfig, "A configuration wasn't specified. A default one is being used.")
		cfg = DefaultConfig()
		log.Info(siteDefaultUsed, "Default raw configuration used", "config", cfg.String())
	}
	for i := range cfg.Plugins {
		if cfg.Plugins[i].Name == "" {
			cfg.Plugins[i].Name = cfg.Plugins[i].Type
		}
	}
	if cfg.FeatureGates == nil {
		cfg.FeatureGates = FeatureGates{}
	}
	if err := validateFeatureGates(cfg.FeatureGates); err != nil {
		return nil, nil, fmt.Errorf("feature gate validation failed: %w", err)
	}
	gates, err := loadFeatureConfig(cfg.FeatureGates)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to load feature gates: %w", err)
	}
	return cfg, gates, nil
}

// WeightedScorer is a scorer and its profile weight.
type WeightedScorer struct {
	framework.Scorer
	Weight float64
}

// ProfileSpec is a profile's plugins sorted into their slots.
type ProfileSpec struct {
	Name    string
	Filters []framework.Filter
	Scorers []WeightedScorer
	Picker  framework.Picker
}

// Source is a data-layer source and its extractors.
type Source struct {
	Plugin     framework.Plugin
	Extractors []framework.Plugin
}

// Loaded is what phase two produces.
type Loaded struct {
	Profiles map[string]*ProfileSpec
	// ProfileOrder is the profiles in config order.
	ProfileOrder []string
	Handler      framework.ProfileHandler
	Sources      []Source
	Parsers      []framework.Parser
}

// Instantiate is InstantiateAndConfigure: validate and build the plugins,
// inject the system defaults, log the effective config, validate it, and
// assemble profiles, the data layer and the parsers.
func Instantiate(cfg *EndpointPickerConfig, factories map[string]Factory, h *Handle) (*Loaded, error) {
	if err := validatePlugins(cfg.Plugins); err != nil {
		return nil, fmt.Errorf("configuration validation failed: %w", err)
	}
	if err := instantiatePlugins(cfg.Plugins, factories, h); err != nil {
		return nil, fmt.Errorf("plugin instantiation failed: %w", err)
	}
	if err := applySystemDefaults(cfg, factories, h); err != nil {
		return nil, fmt.Errorf("system default application failed: %w", err)
	}
	h.Log.Info(siteEffective, "Instantiated all plugins and applied system defaults. Effective raw configuration", "config", cfg.String())
	if err := validateConfig(cfg); err != nil {
		return nil, fmt.Errorf("configuration validation failed: %w", err)
	}
	out := &Loaded{}
	var err error
	if out.Profiles, out.ProfileOrder, out.Handler, err = buildSchedulerConfig(cfg.SchedulingProfiles, h); err != nil {
		return nil, fmt.Errorf("scheduler config build failed: %w", err)
	}
	if out.Sources, err = buildDataLayer(cfg.DataLayer, h); err != nil {
		return nil, fmt.Errorf("data layer config build failed: %w", err)
	}
	if len(out.Sources) == 0 {
		h.Log.Info(siteNoSources, "No data sources configured; metrics collection is disabled")
	}
	gates, err := loadFeatureConfig(cfg.FeatureGates)
	if err != nil {
		return nil, fmt.Errorf("failed to load feature gates: %w", err)
	}
	if gates["flowControl"] {
		return nil, errors.New("failed to load flow control config: the sim does not emulate the flowControl feature gate")
	}
	if out.Parsers, err = buildParsers(cfg.RequestHandler.Parsers, h); err != nil {
		return nil, fmt.Errorf("parser registry build failed: %w", err)
	}
	ref := cfg.FlowControl.SaturationDetector.PluginRef
	p := h.Plugin(ref)
	if p == nil {
		return nil, fmt.Errorf("saturation detector plugin '%s' not found", ref)
	}
	if p.TypedName().Type != TypeUtilizationDetector && p.TypedName().Type != "concurrency-detector" {
		return nil, fmt.Errorf("plugin '%s' is not a fwkfc.SaturationDetector", ref)
	}
	return out, nil
}

func validatePlugins(specs []PluginSpec) error {
	seen := map[string]bool{}
	for _, s := range specs {
		if s.Type == "" {
			return fmt.Errorf("plugin '%s' is missing a type", s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("duplicate plugin name '%s'", s.Name)
		}
		seen[s.Name] = true
		if _, ok := Catalog[s.Type]; !ok {
			return fmt.Errorf("plugin type '%s' is not registered", s.Type)
		}
	}
	return nil
}

// pluginDeps is the plugin-reference dependencies of the types registered
// with a config parser (disagg-profile-handler's deciders).
func pluginDeps(s PluginSpec) ([]string, error) {
	if s.Type != TypeDisaggProfileHandler {
		return nil, nil
	}
	p, err := ParseDisaggParameters(s.Parameters)
	if err != nil {
		return nil, err
	}
	var deps []string
	for _, d := range []string{p.Deciders.Prefill, p.Deciders.Encode} {
		if d != "" {
			deps = append(deps, d)
		}
	}
	return deps, nil
}

// instantiatePlugins builds the plugins dependencies first (buildPluginDAG),
// otherwise in config order.
func instantiatePlugins(specs []PluginSpec, factories map[string]Factory, h *Handle) error {
	byName := map[string]PluginSpec{}
	deps := map[string][]string{}
	for _, s := range specs {
		d, err := pluginDeps(s)
		if err != nil {
			return fmt.Errorf("failed to build plugin dependency graph: failed to parse plugin parameters for %s (type: %s): %w", s.Name, s.Type, err)
		}
		deps[s.Name] = d
		byName[s.Name] = s
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string) error
	visit = func(n string) error {
		switch state[n] {
		case 2:
			return nil
		case 1:
			return errors.New("failed to build plugin dependency graph: cycle detected: graph is not a DAG")
		}
		if _, ok := byName[n]; !ok {
			return fmt.Errorf("failed to build plugin dependency graph: a plugin has a dependency on the unregistered plugin %s", n)
		}
		state[n] = 1
		for _, d := range deps[n] {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[n] = 2
		order = append(order, n)
		return nil
	}
	for _, s := range specs {
		if err := visit(s.Name); err != nil {
			return err
		}
	}
	for _, n := range order {
		s := byName[n]
		if Catalog[s.Type].Deprecated {
			h.Log.Info(siteDeprecatedPlugin, "DEPRECATION warning: plugin is deprecated", "plugin", s.Name, "type", s.Type)
		}
		p, err := build(factories, s.Type, s.Name, s.Parameters, h)
		if err != nil {
			return fmt.Errorf("failed to create plugin '%s' (type: %s): %w", s.Name, s.Type, err)
		}
		h.AddPlugin(s.Name, p)
	}
	return nil
}

func build(factories map[string]Factory, typ, name string, params json.RawMessage, h *Handle) (framework.Plugin, error) {
	f, ok := factories[typ]
	if !ok {
		return nil, fmt.Errorf("plugin type %q is registered in llm-d-router v0.10.0 but not emulated by the sim", typ)
	}
	return f(name, StrictDecoder(params), h)
}

// registerDefault instantiates typ with no parameters under its type name
// and appends it to the config (registerDefaultPlugin).
func registerDefault(cfg *EndpointPickerConfig, factories map[string]Factory, h *Handle, typ string) error {
	if _, ok := Catalog[typ]; !ok {
		return fmt.Errorf("plugin type '%s' not found in registry", typ)
	}
	p, err := build(factories, typ, typ, nil, h)
	if err != nil {
		return fmt.Errorf("failed to instantiate default plugin '%s': %w", typ, err)
	}
	h.AddPlugin(typ, p)
	cfg.Plugins = append(cfg.Plugins, PluginSpec{Name: typ, Type: typ})
	return nil
}

func applySystemDefaults(cfg *EndpointPickerConfig, f map[string]Factory, h *Handle) error {
	if err := ensureSchedulingLayer(cfg, f, h); err != nil {
		return fmt.Errorf("failed to apply scheduling system defaults: %w", err)
	}
	for _, typ := range []string{TypeFCFSOrdering, TypeGlobalStrictFairness, TypeStaticUsageLimit} {
		if h.Plugin(typ) == nil {
			if err := registerDefault(cfg, f, h, typ); err != nil {
				return fmt.Errorf("failed to apply flow control system defaults: %w", err)
			}
		}
	}
	if err := ensureParsers(cfg, f, h); err != nil {
		return fmt.Errorf("failed to apply parser defaults: %w", err)
	}
	if err := ensureSaturationDetector(cfg, f, h); err != nil {
		return fmt.Errorf("failed to apply saturation detector defaults: %w", err)
	}
	if err := ensureDataLayer(cfg, f, h); err != nil {
		return fmt.Errorf("failed to apply data layer defaults: %w", err)
	}
	return nil
}

func isFilter(p framework.Plugin) bool { _, ok := p.(framework.Filter); return ok }
func isScorer(p framework.Plugin) bool { _, ok := p.(framework.Scorer); return ok }
func isPicker(p framework.Plugin) bool { _, ok := p.(framework.Picker); return ok }
func isHandler(p framework.Plugin) bool {
	_, ok := p.(framework.ProfileHandler)
	return ok
}

func ensureSchedulingLayer(cfg *EndpointPickerConfig, f map[string]Factory, h *Handle) error {
	if len(cfg.SchedulingProfiles) == 0 {
		def := SchedulingProfile{Name: "default"}
		// The source ranges over a map; the sim keeps instantiation order.
		for _, n := range h.Names() {
			if p := h.Plugin(n); isFilter(p) || isScorer(p) || isPicker(p) {
				def.Plugins = append(def.Plugins, SchedulingPlugin{PluginRef: n})
			}
		}
		cfg.SchedulingProfiles = []SchedulingProfile{def}
	}
	if len(cfg.SchedulingProfiles) == 1 {
		has := false
		for _, p := range h.Plugins() {
			has = has || isHandler(p)
		}
		if !has {
			if err := registerDefault(cfg, f, h, TypeSingleProfileHandler); err != nil {
				return err
			}
		}
	}
	picker := ""
	for _, n := range h.Names() {
		if isPicker(h.Plugin(n)) {
			picker = n
			break
		}
	}
	if picker == "" {
		if err := registerDefault(cfg, f, h, TypeMaxScorePicker); err != nil {
			return err
		}
		picker = TypeMaxScorePicker
	}
	w := DefaultScorerWeight
	for i, prof := range cfg.SchedulingProfiles {
		hasPicker := false
		for j, ref := range prof.Plugins {
			p := h.Plugin(ref.PluginRef)
			if p != nil && isScorer(p) && ref.Weight == nil {
				cfg.SchedulingProfiles[i].Plugins[j].Weight = &w
			}
			if p != nil && isPicker(p) {
				hasPicker = true
			}
		}
		if !hasPicker {
			cfg.SchedulingProfiles[i].Plugins = append(cfg.SchedulingProfiles[i].Plugins, SchedulingPlugin{PluginRef: picker})
		}
	}
	return nil
}

func ensureParsers(cfg *EndpointPickerConfig, f map[string]Factory, h *Handle) error {
	if cfg.RequestHandler == nil {
		cfg.RequestHandler = &RequestHandlerConfig{}
	}
	if len(cfg.RequestHandler.Parsers) == 0 {
		cfg.RequestHandler.Parsers = []ParserConfig{{PluginRef: TypeOpenAIParser}, {PluginRef: TypeAnthropicParser}, {PluginRef: TypeVLLMHTTPParser}}
	}
	for _, pc := range cfg.RequestHandler.Parsers {
		if h.Plugin(pc.PluginRef) == nil {
			if err := registerDefault(cfg, f, h, pc.PluginRef); err != nil {
				return err
			}
		}
	}
	return nil
}

func ensureSaturationDetector(cfg *EndpointPickerConfig, f map[string]Factory, h *Handle) error {
	if cfg.FlowControl == nil {
		cfg.FlowControl = &FlowControlConfig{}
	}
	sd := cfg.FlowControl.SaturationDetector
	if sd == nil {
		sd = &SaturationDetectorConfig{PluginRef: TypeUtilizationDetector}
		cfg.FlowControl.SaturationDetector = sd
	}
	if sd.PluginRef == "" {
		sd.PluginRef = TypeUtilizationDetector
	}
	if sd.PluginRef == TypeUtilizationDetector && h.Plugin(sd.PluginRef) == nil {
		return registerDefault(cfg, f, h, TypeUtilizationDetector)
	}
	return nil
}

func ensureDataLayer(cfg *EndpointPickerConfig, f map[string]Factory, h *Handle) error {
	if cfg.DataLayer != nil && cfg.DataLayer.InjectDefaults != nil && !*cfg.DataLayer.InjectDefaults {
		return nil
	}
	if cfg.DataLayer != nil {
		for _, s := range cfg.DataLayer.Sources {
			if s.PluginRef == TypeMetricsDataSource {
				return nil
			}
		}
	}
	for _, typ := range []string{TypeMetricsDataSource, TypeMetricsExtractor} {
		if h.Plugin(typ) == nil {
			if err := registerDefault(cfg, f, h, typ); err != nil {
				return err
			}
		}
	}
	if cfg.DataLayer == nil {
		cfg.DataLayer = &DataLayerConfig{}
	}
	cfg.DataLayer.Sources = append(cfg.DataLayer.Sources, DataLayerSource{
		PluginRef: TypeMetricsDataSource, Extractors: []DataLayerExtractor{{PluginRef: TypeMetricsExtractor}},
	})
	return nil
}

func definedNames(cfg *EndpointPickerConfig) map[string]bool {
	m := map[string]bool{}
	for _, p := range cfg.Plugins {
		m[p.Name] = true
	}
	return m
}

func validateConfig(cfg *EndpointPickerConfig) error {
	if err := validateFeatureGates(cfg.FeatureGates); err != nil {
		return fmt.Errorf("feature gate validation failed: %w", err)
	}
	defined := definedNames(cfg)
	seen := map[string]bool{}
	for i, prof := range cfg.SchedulingProfiles {
		if prof.Name == "" {
			return fmt.Errorf("scheduling profile validation failed: %w", fmt.Errorf("schedulingProfiles[%d] is missing a name", i))
		}
		if seen[prof.Name] {
			return fmt.Errorf("scheduling profile validation failed: %w", fmt.Errorf("schedulingProfiles[%d] has duplicate name '%s'", i, prof.Name))
		}
		seen[prof.Name] = true
		for j, ref := range prof.Plugins {
			if ref.PluginRef == "" {
				return fmt.Errorf("scheduling profile validation failed: %w", fmt.Errorf("schedulingProfiles[%s].plugins[%d] is missing a 'pluginRef'", prof.Name, j))
			}
			if !defined[ref.PluginRef] {
				return fmt.Errorf("scheduling profile validation failed: %w", fmt.Errorf("schedulingProfiles[%s] references undefined plugin '%s'", prof.Name, ref.PluginRef))
			}
		}
	}
	if fc := cfg.FlowControl; fc != nil && fc.SaturationDetector != nil {
		if fc.SaturationDetector.PluginRef == "" {
			return fmt.Errorf("saturation detector validation failed: %w", errors.New("saturation detector plugin reference is empty"))
		}
		if !defined[fc.SaturationDetector.PluginRef] {
			return fmt.Errorf("saturation detector validation failed: %w", fmt.Errorf("saturation detector references undefined plugin '%s'", fc.SaturationDetector.PluginRef))
		}
	}
	if rh := cfg.RequestHandler; rh != nil {
		for _, pc := range rh.Parsers {
			if !defined[pc.PluginRef] {
				return fmt.Errorf("parser validation failed: %w", fmt.Errorf("parser references undefined plugin '%s'", pc.PluginRef))
			}
		}
	}
	return nil
}

func validateFeatureGates(gates FeatureGates) error {
	for _, g := range gates {
		parts := strings.Split(g, "=")
		if _, ok := featureGates[parts[0]]; !ok {
			return fmt.Errorf("feature gate '%s' is unknown or unregistered", parts[0])
		}
		if len(parts) > 1 {
			if _, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(parts[1]))); err != nil {
				return fmt.Errorf("%s is not a valid value for the feature gate %s (error: %w)", parts[1], parts[0], err)
			}
		}
	}
	return nil
}

func loadFeatureConfig(gates FeatureGates) (map[string]bool, error) {
	out := map[string]bool{}
	for g, v := range featureGates {
		out[g] = v
	}
	for _, g := range gates {
		v := true
		parts := strings.Split(g, "=")
		if len(parts) > 1 {
			var err error
			if v, err = strconv.ParseBool(strings.TrimSpace(strings.ToLower(parts[1]))); err != nil {
				return nil, err
			}
		}
		out[parts[0]] = v
	}
	return out, nil
}

func buildSchedulerConfig(profiles []SchedulingProfile, h *Handle) (map[string]*ProfileSpec, []string, framework.ProfileHandler, error) {
	out := map[string]*ProfileSpec{}
	var order []string
	for _, cp := range profiles {
		ps := &ProfileSpec{Name: cp.Name}
		for _, ref := range cp.Plugins {
			p := h.Plugin(ref.PluginRef)
			if p == nil {
				return nil, nil, nil, fmt.Errorf("plugin '%s' referenced in profile '%s' not found in handle", ref.PluginRef, cp.Name)
			}
			if s, ok := p.(framework.Scorer); ok {
				w := DefaultScorerWeight
				if ref.Weight != nil {
					w = *ref.Weight
				}
				ps.Scorers = append(ps.Scorers, WeightedScorer{Scorer: s, Weight: w})
			}
			if f, ok := p.(framework.Filter); ok {
				ps.Filters = append(ps.Filters, f)
			}
			if pk, ok := p.(framework.Picker); ok {
				if ps.Picker != nil {
					return nil, nil, nil, fmt.Errorf("failed to add plugin '%s' to profile '%s': %w", ref.PluginRef, cp.Name,
						fmt.Errorf("failed to set '%s' as picker, already have a registered picker plugin '%s'", pk.TypedName(), ps.Picker.TypedName()))
				}
				ps.Picker = pk
			}
		}
		out[cp.Name] = ps
		order = append(order, cp.Name)
	}
	var handler framework.ProfileHandler
	for _, n := range h.Names() {
		if ph, ok := h.Plugin(n).(framework.ProfileHandler); ok {
			if handler != nil {
				return nil, nil, nil, fmt.Errorf("multiple profile handlers found ('%s', '%s'); only one is allowed", handler.TypedName().Name, n)
			}
			handler = ph
		}
	}
	if handler == nil {
		return nil, nil, nil, errors.New("no profile handler configured")
	}
	if handler.TypedName().Type == TypeSingleProfileHandler && len(out) > 1 {
		return nil, nil, nil, errors.New("SingleProfileHandler cannot support multiple scheduling profiles")
	}
	return out, order, handler, nil
}

func buildDataLayer(dl *DataLayerConfig, h *Handle) ([]Source, error) {
	if dl == nil {
		return nil, nil
	}
	if dl.Discovery != nil {
		return nil, errors.New("the sim does not emulate file discovery (dataLayer.discovery)")
	}
	var out []Source
	for _, s := range dl.Sources {
		p := h.Plugin(s.PluginRef)
		if p == nil || !isSource(p) {
			return nil, fmt.Errorf("the plugin %s is not a fwkdl.DataSource", s.PluginRef)
		}
		src := Source{Plugin: p}
		for _, e := range s.Extractors {
			ep := h.Plugin(e.PluginRef)
			if ep == nil {
				return nil, fmt.Errorf("the plugin %s is not registered", e.PluginRef)
			}
			src.Extractors = append(src.Extractors, ep)
		}
		out = append(out, src)
	}
	return out, nil
}

// DataSource marks the data-layer source plugins.
type DataSource interface {
	framework.Plugin
	DataSource()
}

func isSource(p framework.Plugin) bool { _, ok := p.(DataSource); return ok }

func buildParsers(refs []ParserConfig, h *Handle) ([]framework.Parser, error) {
	if len(refs) == 0 {
		return nil, errors.New("no parsers configured")
	}
	var out []framework.Parser
	for _, pc := range refs {
		p := h.Plugin(pc.PluginRef)
		if p == nil {
			return nil, fmt.Errorf("the configured parser %q is not loaded", pc.PluginRef)
		}
		parser, ok := p.(framework.Parser)
		if !ok {
			return nil, fmt.Errorf("the plugin %q is not a parser plugin", pc.PluginRef)
		}
		out = append(out, parser)
	}
	return out, nil
}

// CreateMissingProducers auto-creates the default producer of every data
// key a plugin consumes and nothing produces (datalayer.CreateMissingDataProducers),
// logging "auto-created default producer".
func CreateMissingProducers(f map[string]Factory, h *Handle) error {
	for {
		produced := map[string]bool{}
		for _, p := range h.Plugins() {
			if pr, ok := p.(framework.Producer); ok {
				for _, k := range pr.Produces() {
					produced[k.String()] = true
				}
			}
		}
		type need struct{ key, consumer string }
		var missing []need
		seen := map[string]bool{}
		for _, p := range h.Plugins() {
			if c, ok := p.(framework.Consumer); ok {
				for _, k := range c.Consumes() {
					if !produced[k.String()] && !seen[k.String()] {
						seen[k.String()] = true
						missing = append(missing, need{k.String(), c.TypedName().Name})
					}
				}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		created := 0
		for _, m := range missing {
			typ, ok := DefaultProducers[m.key]
			if !ok {
				return fmt.Errorf("no default producer found for missing data key %v, consumed by %v", m.key, m.consumer)
			}
			if h.Plugin(typ) != nil {
				continue
			}
			p, err := build(f, typ, typ, nil, h)
			if err != nil {
				return fmt.Errorf("failed to instantiate data producer %q: %w, this is required by datakey: %v, which is consumed by: %v", typ, err, m.key, m.consumer)
			}
			h.AddPlugin(p.TypedName().Name, p)
			h.Log.Info(siteAutoCreated, "auto-created default producer", "producer", p.TypedName().String(), "dataKey", m.key, "consumer", m.consumer)
			created++
		}
		if created == 0 {
			return nil
		}
	}
}

// ProducerOrder sorts the producers so every producer runs after the
// producers of the keys it consumes (ValidateAndOrderDataDependencies).
func ProducerOrder(h *Handle) ([]framework.Producer, error) {
	var prods []framework.Producer
	for _, p := range h.Plugins() {
		if pr, ok := p.(framework.Producer); ok {
			prods = append(prods, pr)
		}
	}
	producerOf := map[string]framework.Producer{}
	for _, p := range prods {
		for _, k := range p.Produces() {
			producerOf[k.String()] = p
		}
	}
	var out []framework.Producer
	state := map[framework.Producer]int{}
	var visit func(p framework.Producer) error
	visit = func(p framework.Producer) error {
		switch state[p] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("data dependency cycle at plugin %s", p.TypedName())
		}
		state[p] = 1
		if c, ok := p.(framework.Consumer); ok {
			for _, k := range c.Consumes() {
				if dep, ok := producerOf[k.String()]; ok && dep != p {
					if err := visit(dep); err != nil {
						return err
					}
				}
			}
		}
		state[p] = 2
		out = append(out, p)
		return nil
	}
	for _, p := range prods {
		if err := visit(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckStability is fwkplugin.ValidatePluginStability.
func CheckStability(h *Handle, allowExperimental bool) error {
	names := h.Names()
	slices.Sort(names)
	for _, n := range names {
		tn := h.Plugin(n).TypedName()
		if Catalog[tn.Type].Stability == Alpha && !allowExperimental {
			return fmt.Errorf("plugin '%s' (type: '%s') has Alpha stability level, but command line flag --allow-experimental-plugins is not set", tn.Name, tn.Type)
		}
	}
	return nil
}

// DisaggParameters are disagg-profile-handler's parameters.
type DisaggParameters struct {
	StageOrder string `json:"stageOrder,omitempty"`
	Profiles   struct {
		Decode  string `json:"decode,omitempty"`
		Prefill string `json:"prefill,omitempty"`
		Encode  string `json:"encode,omitempty"`
	} `json:"profiles"`
	Deciders struct {
		Prefill string `json:"prefill,omitempty"`
		Encode  string `json:"encode,omitempty"`
	} `json:"deciders"`
}

// ParseDisaggParameters decodes the nested schema strictly and applies the
// profile defaults (DisaggProfileHandlerConfigParser; the deprecated flat
// schema is not emulated and reported as the nested error).
func ParseDisaggParameters(raw json.RawMessage) (DisaggParameters, error) {
	var p DisaggParameters
	if dec := StrictDecoder(raw); dec != nil {
		if err := dec.Decode(&p); err != nil {
			return p, fmt.Errorf("failed to parse parameters of the disagg-profile-handler: nested schema error: %w", err)
		}
	}
	switch strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(p.StageOrder)) {
	case "", "decodefirst", "decode":
		p.StageOrder = "decode-first"
	case "prefillfirst", "prefill":
		p.StageOrder = "prefill-first"
	default:
		return p, fmt.Errorf("invalid stage order %q, must be %q or %q", p.StageOrder, "decode-first", "prefill-first")
	}
	if p.StageOrder == "prefill-first" && p.Deciders.Prefill != "" {
		return p, fmt.Errorf("prefill decider is not supported in %s stage order", "prefill-first")
	}
	if p.Profiles.Decode == "" {
		p.Profiles.Decode = "decode"
	}
	if p.Profiles.Prefill == "" {
		p.Profiles.Prefill = "prefill"
	}
	if p.Profiles.Encode == "" {
		p.Profiles.Encode = "encode"
	}
	return p, nil
}
