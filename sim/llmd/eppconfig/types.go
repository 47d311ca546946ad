// Package eppconfig is the EPP's EndpointPickerConfig: the API types with
// their String() renderings (llm-d/llm-d-router@71f4f099:apix/config/v1alpha1/endpointpickerconfig_types.go),
// strict decoding through apimachinery as the loader does, the built-in
// default config, the registered plugin catalog, and the loader's phases
// with default injection and validation (pkg/epp/config/loader/{configloader,defaults,validation}.go).
package eppconfig

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const nilString = "<nil>"

// EndpointPickerConfig is the config file's schema.
type EndpointPickerConfig struct {
	metav1.TypeMeta `json:",inline"`

	FeatureGates       FeatureGates              `json:"featureGates,omitempty"`
	Plugins            []PluginSpec              `json:"plugins"`
	SchedulingProfiles []SchedulingProfile       `json:"schedulingProfiles"`
	DataLayer          *DataLayerConfig          `json:"dataLayer"`
	FlowControl        *FlowControlConfig        `json:"flowControl,omitempty"`
	RequestHandler     *RequestHandlerConfig     `json:"requestHandler,omitempty"`
	SaturationDetector *SaturationDetectorConfig `json:"saturationDetector,omitempty"`
	Parser             *ParserConfig             `json:"parser,omitempty"`
}

// DeepCopyObject implements runtime.Object (the decoder needs it).
func (cfg *EndpointPickerConfig) DeepCopyObject() runtime.Object {
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	out := &EndpointPickerConfig{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// String renders the config as the loader logs it: only the sections set,
// slices with fmt's %v (space separated), weights as %.2f.
func (cfg EndpointPickerConfig) String() string {
	var parts []string
	if len(cfg.FeatureGates) > 0 {
		parts = append(parts, fmt.Sprintf("FeatureGates: %s", cfg.FeatureGates))
	}
	if len(cfg.Plugins) > 0 {
		parts = append(parts, fmt.Sprintf("Plugins: %v", cfg.Plugins))
	}
	if len(cfg.SchedulingProfiles) > 0 {
		parts = append(parts, fmt.Sprintf("SchedulingProfiles: %v", cfg.SchedulingProfiles))
	}
	if cfg.DataLayer != nil {
		parts = append(parts, fmt.Sprintf("DataLayer: %v", cfg.DataLayer))
	}
	if cfg.FlowControl != nil {
		parts = append(parts, fmt.Sprintf("FlowControl: %v", cfg.FlowControl))
	}
	if cfg.RequestHandler != nil {
		parts = append(parts, fmt.Sprintf("RequestHandler: %v", cfg.RequestHandler))
	}
	if cfg.SaturationDetector != nil {
		parts = append(parts, fmt.Sprintf("SaturationDetector: %v", cfg.SaturationDetector))
	}
	if cfg.Parser != nil {
		parts = append(parts, fmt.Sprintf("Parser: %v", cfg.Parser))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// PluginSpec is one plugins[] entry.
type PluginSpec struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters"`
}

func (ps PluginSpec) String() string {
	var parts []string
	if ps.Name != "" {
		parts = append(parts, "Name: "+ps.Name)
	}
	parts = append(parts, "Type: "+ps.Type)
	if len(ps.Parameters) > 0 {
		parts = append(parts, "Parameters: "+string(ps.Parameters))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// SchedulingProfile is one schedulingProfiles[] entry.
type SchedulingProfile struct {
	Name    string             `json:"name"`
	Plugins []SchedulingPlugin `json:"plugins"`
}

func (sp SchedulingProfile) String() string {
	parts := []string{"Name: " + sp.Name}
	if len(sp.Plugins) > 0 {
		parts = append(parts, fmt.Sprintf("Plugins: %v", sp.Plugins))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// SchedulingPlugin is a profile's reference to a plugin, with its weight.
type SchedulingPlugin struct {
	PluginRef string   `json:"pluginRef"`
	Weight    *float64 `json:"weight"`
}

func (sp SchedulingPlugin) String() string {
	parts := []string{"PluginRef: " + sp.PluginRef}
	if sp.Weight != nil {
		parts = append(parts, fmt.Sprintf("Weight: %.2f", *sp.Weight))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// FeatureGates are "name", "name=true" or "name=false".
type FeatureGates []string

func (fg FeatureGates) String() string {
	if fg == nil {
		return "{}"
	}
	return "{" + strings.Join(fg, ",") + "}"
}

// SaturationDetectorConfig names the saturation detector plugin.
type SaturationDetectorConfig struct {
	PluginRef string `json:"pluginRef,omitempty"`
}

func (sdc *SaturationDetectorConfig) String() string {
	if sdc == nil {
		return nilString
	}
	return fmt.Sprintf("{PluginRef: %s}", sdc.PluginRef)
}

// DataLayerConfig configures data sources and discovery.
type DataLayerConfig struct {
	InjectDefaults              *bool             `json:"injectDefaults,omitempty"`
	Sources                     []DataLayerSource `json:"sources,omitempty"`
	Discovery                   *DiscoveryConfig  `json:"discovery,omitempty"`
	CrossReplicaSyncerPluginRef string            `json:"crossReplicaSyncerPluginRef,omitempty"`
	CrossReplicaSyncInterval    *metav1.Duration  `json:"crossReplicaSyncInterval,omitempty"`
}

func (dlc *DataLayerConfig) String() string {
	if dlc == nil {
		return nilString
	}
	return fmt.Sprintf("{Sources: %v, Discovery: %v, CrossReplicaSyncerPluginRef: %s, CrossReplicaSyncInterval: %v}",
		dlc.Sources, dlc.Discovery, dlc.CrossReplicaSyncerPluginRef, dlc.CrossReplicaSyncInterval)
}

// DiscoveryConfig references an endpoint discovery plugin.
type DiscoveryConfig struct {
	PluginRef string `json:"pluginRef"`
}

func (dc *DiscoveryConfig) String() string {
	if dc == nil {
		return nilString
	}
	return fmt.Sprintf("{PluginRef: %s}", dc.PluginRef)
}

// DataLayerSource is a data source and its extractors.
type DataLayerSource struct {
	PluginRef  string               `json:"pluginRef"`
	Extractors []DataLayerExtractor `json:"extractors"`
}

func (dls DataLayerSource) String() string {
	parts := []string{"PluginRef: " + dls.PluginRef}
	if len(dls.Extractors) > 0 {
		parts = append(parts, fmt.Sprintf("Extractors: %v", dls.Extractors))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// DataLayerExtractor references an extractor plugin.
type DataLayerExtractor struct {
	PluginRef string `json:"pluginRef"`
}

func (dle DataLayerExtractor) String() string { return fmt.Sprintf("{PluginRef: %s}", dle.PluginRef) }

// RequestHandlerConfig lists the parsers.
type RequestHandlerConfig struct {
	Parsers []ParserConfig `json:"parsers,omitempty"`
}

func (rhc *RequestHandlerConfig) String() string {
	if rhc == nil {
		return nilString
	}
	var parts []string
	if len(rhc.Parsers) > 0 {
		ps := make([]string, len(rhc.Parsers))
		for i := range rhc.Parsers {
			ps[i] = rhc.Parsers[i].String()
		}
		parts = append(parts, fmt.Sprintf("Parsers: [%s]", strings.Join(ps, ", ")))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ParserConfig references a parser plugin.
type ParserConfig struct {
	PluginRef string `json:"pluginRef"`
}

func (pc *ParserConfig) String() string {
	if pc == nil {
		return nilString
	}
	return fmt.Sprintf("{PluginRef: %s}", pc.PluginRef)
}

// FlowControlConfig is the flow-control section; the emulation decodes it
// strictly and renders it, and runs with the flowControl gate off.
type FlowControlConfig struct {
	MaxBytes                    *resource.Quantity        `json:"maxBytes,omitempty"`
	MaxRequests                 *resource.Quantity        `json:"maxRequests,omitempty"`
	DefaultRequestTTL           *metav1.Duration          `json:"defaultRequestTTL,omitempty"`
	DefaultPriorityBand         *PriorityBandConfig       `json:"defaultPriorityBand,omitempty"`
	DefaultNegativePriorityBand *PriorityBandConfig       `json:"defaultNegativePriorityBand,omitempty"`
	PriorityBands               []PriorityBandConfig      `json:"priorityBands,omitempty"`
	UsageLimitPolicyPluginRef   string                    `json:"usageLimitPolicyPluginRef,omitempty"`
	SaturationDetector          *SaturationDetectorConfig `json:"saturationDetector,omitempty"`
	EnableEviction              bool                      `json:"enableEviction,omitempty"`
}

func (fcc *FlowControlConfig) String() string {
	if fcc == nil {
		return nilString
	}
	var parts []string
	if fcc.MaxBytes != nil {
		parts = append(parts, fmt.Sprintf("MaxBytes: %d", fcc.MaxBytes.Value()))
	} else {
		parts = append(parts, "MaxBytes: unlimited")
	}
	if fcc.MaxRequests != nil {
		parts = append(parts, fmt.Sprintf("MaxRequests: %d", fcc.MaxRequests.Value()))
	} else {
		parts = append(parts, "MaxRequests: unlimited")
	}
	if fcc.DefaultRequestTTL != nil {
		parts = append(parts, fmt.Sprintf("DefaultRequestTTL: %s", fcc.DefaultRequestTTL.Duration))
	}
	if fcc.DefaultPriorityBand != nil {
		parts = append(parts, fmt.Sprintf("DefaultPriorityBand: %v", fcc.DefaultPriorityBand))
	}
	if fcc.DefaultNegativePriorityBand != nil {
		parts = append(parts, fmt.Sprintf("DefaultNegativePriorityBand: %v", fcc.DefaultNegativePriorityBand))
	}
	if len(fcc.PriorityBands) > 0 {
		parts = append(parts, fmt.Sprintf("PriorityBands: %v", fcc.PriorityBands))
	}
	if fcc.UsageLimitPolicyPluginRef != "" {
		parts = append(parts, "UsageLimitPolicyRef: "+fcc.UsageLimitPolicyPluginRef)
	}
	if fcc.SaturationDetector != nil {
		parts = append(parts, fmt.Sprintf("SaturationDetector: %v", fcc.SaturationDetector))
	}
	if fcc.EnableEviction {
		parts = append(parts, "EnableEviction: true")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// PriorityBandConfig is one priority band.
type PriorityBandConfig struct {
	Priority          int                `json:"priority"`
	MaxBytes          *resource.Quantity `json:"maxBytes,omitempty"`
	MaxRequests       *resource.Quantity `json:"maxRequests,omitempty"`
	FairnessPolicyRef string             `json:"fairnessPolicyRef,omitempty"`
	OrderingPolicyRef string             `json:"orderingPolicyRef,omitempty"`
}

func (pbc PriorityBandConfig) String() string {
	parts := []string{fmt.Sprintf("Priority: %d", pbc.Priority)}
	if pbc.MaxBytes != nil {
		parts = append(parts, fmt.Sprintf("MaxBytes: %d", pbc.MaxBytes.Value()))
	}
	if pbc.MaxRequests != nil {
		parts = append(parts, fmt.Sprintf("MaxRequests: %d", pbc.MaxRequests.Value()))
	}
	if pbc.FairnessPolicyRef != "" {
		parts = append(parts, "FairnessPolicyRef: "+pbc.FairnessPolicyRef)
	}
	if pbc.OrderingPolicyRef != "" {
		parts = append(parts, "OrderingPolicyRef: "+pbc.OrderingPolicyRef)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
