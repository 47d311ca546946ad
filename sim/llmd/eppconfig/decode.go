package eppconfig

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// The config's API group versions: llm-d.ai/v1alpha1 and the deprecated
// inference.networking.x-k8s.io/v1alpha1 the loader still accepts.
var (
	GroupVersion           = schema.GroupVersion{Group: "llm-d.ai", Version: "v1alpha1"}
	DeprecatedGroupVersion = schema.GroupVersion{Group: "inference.networking.x-k8s.io", Version: "v1alpha1"}
)

var scheme = newScheme()

// newScheme registers the config kind under both group versions, as the
// loader's init and configapi.Install do.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, gv := range []schema.GroupVersion{GroupVersion, DeprecatedGroupVersion} {
		s.AddKnownTypes(gv, &EndpointPickerConfig{})
		metav1.AddToGroupVersion(s, gv)
	}
	return s
}

// Decode parses YAML or JSON strictly (unknown and duplicate fields are
// errors) through apimachinery's universal decoder, as decodeRawConfig does.
func Decode(data []byte) (*EndpointPickerConfig, error) {
	cfg := &EndpointPickerConfig{}
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	if err := runtime.DecodeInto(codecs.UniversalDecoder(), data, cfg); err != nil {
		return nil, fmt.Errorf("failed to decode configuration JSON/YAML: %w", err)
	}
	return cfg, nil
}

// Deprecated reports whether cfg was written with the old API group.
func (cfg *EndpointPickerConfig) Deprecated() bool {
	return cfg.GroupVersionKind().GroupVersion() == DeprecatedGroupVersion
}

// DefaultConfig is loadDefaultConfig: queue 2, kv-cache 2, prefix-cache 3,
// the metrics data source and extractor.
func DefaultConfig() *EndpointPickerConfig {
	w := func(v float64) *float64 { return &v }
	return &EndpointPickerConfig{
		TypeMeta:     metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "EndpointPickerConfig"},
		FeatureGates: FeatureGates{},
		Plugins: []PluginSpec{
			{Type: TypeQueueScorer}, {Type: TypeKVCacheScorer}, {Type: TypePrefixCacheScorer},
			{Type: TypeMetricsDataSource}, {Type: TypeMetricsExtractor},
		},
		SchedulingProfiles: []SchedulingProfile{{Name: "default", Plugins: []SchedulingPlugin{
			{PluginRef: TypeQueueScorer, Weight: w(2)},
			{PluginRef: TypeKVCacheScorer, Weight: w(2)},
			{PluginRef: TypePrefixCacheScorer, Weight: w(3)},
		}}},
		DataLayer: &DataLayerConfig{Sources: []DataLayerSource{{
			PluginRef: TypeMetricsDataSource, Extractors: []DataLayerExtractor{{PluginRef: TypeMetricsExtractor}},
		}}},
	}
}
