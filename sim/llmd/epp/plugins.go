package epp

import (
	"encoding/json"
	"fmt"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	"github.com/gpustack/routing-conformance/sim/llmd/eppconfig"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/prefixcache"
	"github.com/gpustack/routing-conformance/sim/llmd/scheduling"
)

// inert is a plugin the loader instantiates (defaults, parsers, flow
// control policies, the saturation detector, notification sources) that
// takes no part in the routing the sim models.
type inert struct{ tn fw.TypedName }

func (p inert) TypedName() fw.TypedName { return p.tn }
func (p inert) Inert()                  {}

// parser is a request parser with the paths it claims
// (requesthandling/parsers/*).
type parser struct {
	inert
	paths []string
}

func (p parser) Paths() []string { return p.paths }

var parserPaths = map[string][]string{
	eppconfig.TypeOpenAIParser: {"chat/completions", "completions", "embeddings", "responses", "conversations",
		"chat/completions/render", "completions/render", "images/generations"},
	eppconfig.TypeAnthropicParser: {"messages", "messages/count_tokens"},
	eppconfig.TypeVLLMHTTPParser:  {"inference/v1/generate"},
}

// notificationSource is endpoint-notification-source: a data-layer source
// whose extractor (the precise producer) follows endpoint membership.
type notificationSource struct{ inert }

func (notificationSource) DataSource() {}

// noParams accepts only an empty parameter block, as plugins whose factory
// ignores parameters do (they never read the decoder).
func noParams(tn fw.TypedName) fw.Plugin { return inert{tn} }

// factories returns the emulated plugin factories bound to this EPP's
// dependencies.
func (e *eppProcess) factories() map[string]eppconfig.Factory {
	tn := func(typ, name string) fw.TypedName { return fw.TypedName{Type: typ, Name: name} }
	f := map[string]eppconfig.Factory{
		eppconfig.TypeLabelSelectorFilter: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewLabelSelector(name, d)
		},
		eppconfig.TypeQueueScorer: func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewQueueScorer(name), nil
		},
		eppconfig.TypeKVCacheScorer: func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewKVCacheScorer(name), nil
		},
		eppconfig.TypePrefixCacheScorer: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewPrefixScorer(name, d)
		},
		eppconfig.TypeMaxScorePicker: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewMaxScorePicker(name, d, e.rand)
		},
		eppconfig.TypeRandomPicker: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewRandomPicker(name, d, e.rand)
		},
		eppconfig.TypeSingleProfileHandler: func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewSingleHandler(name), nil
		},
		eppconfig.TypePrefixBasedPDDecider: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			p, err := scheduling.NewPrefixBasedPDDecider(name, d)
			if err == nil && p.NonCachedTokens == 0 {
				e.root.Info("disagg/prefix_based_pd_decider.go:85", "Prefix-based PD disabled (NonCachedTokens=0)")
			}
			return p, err
		},
		eppconfig.TypeAlwaysDisaggPDDecider: func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewAlwaysDecider(name), nil
		},
		eppconfig.TypeDisaggProfileHandler: e.disaggFactory,
		eppconfig.TypeApproxPrefixProducer: func(name string, d *json.Decoder, h *eppconfig.Handle) (fw.Plugin, error) {
			a, err := prefixcache.NewApprox(h.Ctx, name, d, h.Log, h.Metrics)
			if err == nil {
				e.approx = append(e.approx, a)
			}
			return a, err
		},
		eppconfig.TypePrecisePrefixProducer: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			p, err := prefixcache.NewPrecise(name, d, e.deps.KVEvents)
			if err == nil {
				e.precise = append(e.precise, p)
			}
			return p, err
		},
		eppconfig.TypeTokenProducer: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return prefixcache.NewTokenProducer(name, d, e.client)
		},
		eppconfig.TypeMetricsDataSource: func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return datalayer.NewSource(name, d, e.client)
		},
		eppconfig.TypeMetricsExtractor: func(name string, d *json.Decoder, h *eppconfig.Handle) (fw.Plugin, error) {
			x, err := datalayer.NewExtractor(name, d)
			if err != nil {
				return nil, err
			}
			for _, r := range x.Registered {
				h.Log.Info("metrics/factories.go:230", "Registered engine mapping", "engine", r.Engine, "mapping", r.Summary)
			}
			return x, nil
		},
		eppconfig.TypeEndpointNotifications: func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return notificationSource{inert{tn(eppconfig.TypeEndpointNotifications, name)}}, nil
		},
	}
	for _, typ := range []string{eppconfig.TypeDecodeFilter, eppconfig.TypePrefillFilter, eppconfig.TypeEncodeFilter} {
		f[typ] = func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return scheduling.NewRoleFilter(typ, name), nil
		}
	}
	for typ, paths := range parserPaths {
		f[typ] = func(name string, _ *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			return parser{inert{tn(typ, name)}, paths}, nil
		}
	}
	for _, typ := range []string{eppconfig.TypeFCFSOrdering, eppconfig.TypeGlobalStrictFairness,
		eppconfig.TypeStaticUsageLimit, eppconfig.TypeUtilizationDetector} {
		f[typ] = func(name string, d *json.Decoder, _ *eppconfig.Handle) (fw.Plugin, error) {
			if d != nil {
				var params map[string]any
				if err := d.Decode(&params); err != nil {
					return nil, err
				}
				if len(params) > 0 {
					return nil, fmt.Errorf("the sim does not emulate %s parameters", typ)
				}
			}
			if typ == eppconfig.TypeStaticUsageLimit {
				// NewConstPolicy names itself "<type>-type" (usagelimits/usagelimitpolicy.go).
				return noParams(tn(typ+"-type", typ)), nil
			}
			return noParams(tn(typ, name)), nil
		}
	}
	return f
}

// disaggFactory is the disagg-profile-handler factory: it registers the
// decision counters and resolves the prefill decider by name.
func (e *eppProcess) disaggFactory(name string, d *json.Decoder, h *eppconfig.Handle) (fw.Plugin, error) {
	h.Metrics.RegisterDisagg()
	var raw json.RawMessage
	if d != nil {
		if err := d.Decode(&raw); err != nil {
			return nil, fmt.Errorf("failed to parse parameters of the disagg-profile-handler - %w", err)
		}
	}
	p, err := eppconfig.ParseDisaggParameters(raw)
	if err != nil {
		return nil, err
	}
	var decider scheduling.Decider
	if p.Deciders.Prefill != "" {
		pl := h.Plugin(p.Deciders.Prefill)
		if pl == nil {
			return nil, fmt.Errorf("deciders.prefill plugin not found: %s", p.Deciders.Prefill)
		}
		var ok bool
		if decider, ok = pl.(scheduling.Decider); !ok {
			return nil, fmt.Errorf("plugin %s does not implement prefillDeciderPlugin", p.Deciders.Prefill)
		}
	} else {
		h.Log.Info("disagg/disagg_profile_handler.go:172", "No deciders.prefill configured, P/D disaggregation disabled")
	}
	if p.Deciders.Encode == "" {
		h.Log.Info("disagg/disagg_profile_handler.go:187", "No deciders.encode configured, E disaggregation disabled")
	} else {
		return nil, fmt.Errorf("the sim does not emulate encode disaggregation (deciders.encode %q)", p.Deciders.Encode)
	}
	return scheduling.NewDisaggHandler(name, p, decider, h.Metrics.DisaggDecision)
}
