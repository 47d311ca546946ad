package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/eppconfig"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
)

// Extension points as the plugin latency metric labels them.
const (
	PointProfilePicker  = "ProfilePicker"
	PointFilter         = "Filter"
	PointScorer         = "Scorer"
	PointPicker         = "Picker"
	PointProcessResults = "ProcessProfilesResults"
)

// Observer receives plugin timings (RecordPluginProcessingLatency).
type Observer func(point string, tn fw.TypedName, d time.Duration)

// ScoreLog receives each scorer's raw score per endpoint, before clamping
// and weighting: the EPP's DEBUG "Calculated score" line
// (scheduling/scheduler_profile.go runScorerPlugins).
type ScoreLog func(scorer fw.TypedName, endpoint *fw.Endpoint, score float64)

// Profile runs one scheduling profile: filters, weighted scorers, picker.
type Profile struct {
	Spec     *eppconfig.ProfileSpec
	observe  Observer
	scoreLog ScoreLog
}

// Run is SchedulerProfile.Run: a filter that empties the set stops the
// chain and fails the profile; each scorer's score is clamped to [0,1] and
// multiplied by its weight; weights are not normalised.
func (p *Profile) Run(ctx context.Context, req *fw.Request, candidates []*fw.Endpoint) (*fw.ProfileResult, error) {
	eps := candidates
	for _, f := range p.Spec.Filters {
		t := time.Now()
		eps = f.Filter(ctx, req, eps)
		p.observe(PointFilter, f.TypedName(), time.Since(t))
		if len(eps) == 0 {
			break
		}
	}
	if len(eps) == 0 {
		return nil, fw.Error{Code: fw.CodeInternal, Msg: "no endpoints available for the given request"}
	}
	totals := Totals(ctx, req, eps, p.Spec.Scorers, p.observe, p.scoreLog)
	storage := make([]fw.ScoredEndpoint, len(eps))
	scored := make([]*fw.ScoredEndpoint, len(eps))
	for i, e := range eps {
		storage[i] = fw.ScoredEndpoint{Endpoint: e, Score: totals[e]}
		scored[i] = &storage[i]
	}
	t := time.Now()
	res := p.Spec.Picker.Pick(ctx, scored)
	p.observe(PointPicker, p.Spec.Picker.TypedName(), time.Since(t))
	if res != nil {
		res.ScoredCandidates = storage
	}
	return res, nil
}

// Totals is runScorerPlugins: Σ weight × clamp(score, 0, 1) per endpoint.
// log, if set, gets every raw score.
func Totals(ctx context.Context, req *fw.Request, eps []*fw.Endpoint, scorers []eppconfig.WeightedScorer, observe Observer, log ScoreLog) map[*fw.Endpoint]float64 {
	totals := make(map[*fw.Endpoint]float64, len(eps))
	for _, e := range eps {
		totals[e] = 0
	}
	for _, s := range scorers {
		t := time.Now()
		scores := s.Score(ctx, req, eps)
		if observe != nil {
			observe(PointScorer, s.TypedName(), time.Since(t))
		}
		for e, v := range scores {
			if log != nil {
				log(s.TypedName(), e, v)
			}
			totals[e] += Clamp(v) * s.Weight
		}
	}
	return totals
}

// Clamp is enforceScoreRange.
func Clamp(v float64) float64 {
	switch {
	case v < 0:
		return 0
	case v > 1:
		return 1
	}
	return v
}

// Scheduler runs the profile handler's loop (scheduling/scheduler.go).
type Scheduler struct {
	handler  fw.ProfileHandler
	profiles map[string]fw.Profile
	observe  Observer
}

// NewScheduler wraps the loaded profiles.
func NewScheduler(l *eppconfig.Loaded, observe Observer) *Scheduler {
	if observe == nil {
		observe = func(string, fw.TypedName, time.Duration) {}
	}
	s := &Scheduler{handler: l.Handler, profiles: map[string]fw.Profile{}, observe: observe}
	for name, spec := range l.Profiles {
		s.profiles[name] = &Profile{Spec: spec, observe: observe}
	}
	return s
}

// LogScores makes every profile report its raw scores to log.
func (s *Scheduler) LogScores(log ScoreLog) {
	for _, p := range s.profiles {
		if pp, ok := p.(*Profile); ok {
			pp.scoreLog = log
		}
	}
}

// Schedule asks the handler for profiles until it picks none, runs them
// (a failed profile's result is nil) and lets the handler assemble.
func (s *Scheduler) Schedule(ctx context.Context, req *fw.Request, candidates []*fw.Endpoint) (*fw.SchedulingResult, error) {
	results := map[string]*fw.ProfileResult{}
	for {
		t := time.Now()
		picked := s.handler.Pick(ctx, req, s.profiles, results)
		s.observe(PointProfilePicker, s.handler.TypedName(), time.Since(t))
		if len(picked) == 0 {
			break
		}
		names := make([]string, 0, len(picked))
		for n := range picked {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			res, err := picked[n].Run(ctx, req, candidates)
			if err != nil {
				res = nil
			}
			results[n] = res
		}
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("failed to run any scheduler profile for request %s", req.RequestID)
	}
	t := time.Now()
	out, err := s.handler.ProcessResults(ctx, req, results)
	s.observe(PointProcessResults, s.handler.TypedName(), time.Since(t))
	return out, err
}

// SingleHandler is single-profile-handler.
type SingleHandler struct{ name string }

// NewSingleHandler builds the handler; it takes no parameters.
func NewSingleHandler(name string) *SingleHandler { return &SingleHandler{name: name} }

// TypedName implements fw.Plugin.
func (h *SingleHandler) TypedName() fw.TypedName {
	return fw.TypedName{Type: "single-profile-handler", Name: h.name}
}

// Pick runs every profile once.
func (h *SingleHandler) Pick(_ context.Context, _ *fw.Request, profiles map[string]fw.Profile, results map[string]*fw.ProfileResult) map[string]fw.Profile {
	if len(profiles) == len(results) {
		return nil
	}
	return profiles
}

// ProcessResults returns the single profile's result.
func (h *SingleHandler) ProcessResults(_ context.Context, _ *fw.Request, results map[string]*fw.ProfileResult) (*fw.SchedulingResult, error) {
	if len(results) != 1 {
		return nil, errors.New("single profile handler is intended to be used with a single profile, failed to process multiple profiles")
	}
	for name, r := range results {
		if r == nil {
			return nil, fmt.Errorf("failed to run scheduler profile '%s'", name)
		}
		return &fw.SchedulingResult{ProfileResults: results, PrimaryProfileName: name}, nil
	}
	return nil, nil
}

// Decider decides whether a request is split (disagg deciders).
type Decider interface {
	fw.Plugin
	Disaggregate(ctx context.Context, req *fw.Request, decode *fw.Endpoint) bool
}

// PrefixBasedPDDecider is prefix-based-pd-decider: split when the prompt's
// tokens not cached on the chosen decode endpoint are at least
// nonCachedTokens (0 never splits), and the prompt reaches promptTokens
// (profilehandler/disagg/prefix_based_pd_decider.go).
type PrefixBasedPDDecider struct {
	name                          string
	NonCachedTokens, PromptTokens int
}

// NewPrefixBasedPDDecider is PrefixBasedPDDeciderPluginFactory.
func NewPrefixBasedPDDecider(name string, dec *json.Decoder) (*PrefixBasedPDDecider, error) {
	var p struct {
		NonCachedTokens int `json:"nonCachedTokens"`
		PromptTokens    int `json:"promptTokens"`
	}
	if dec != nil {
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("failed to parse %s plugin config: %w", "prefix-based-pd-decider", err)
		}
	}
	if p.NonCachedTokens < 0 {
		return nil, fmt.Errorf("failed to create %s plugin: %w", "prefix-based-pd-decider", errors.New("nonCachedTokens parameter of prefix disaggregation decider cannot be negative"))
	}
	if p.PromptTokens < 0 {
		return nil, fmt.Errorf("failed to create %s plugin: %w", "prefix-based-pd-decider", errors.New("promptTokens parameter of prefix disaggregation decider cannot be negative"))
	}
	return &PrefixBasedPDDecider{name: name, NonCachedTokens: p.NonCachedTokens, PromptTokens: p.PromptTokens}, nil
}

// TypedName implements fw.Plugin.
func (d *PrefixBasedPDDecider) TypedName() fw.TypedName {
	return fw.TypedName{Type: "prefix-based-pd-decider", Name: d.name}
}

// Disaggregate implements Decider. It reads the default (approximate)
// producer's match info on the decode endpoint: hit tokens are
// CachedBlockCount × BlockSizeTokens.
func (d *PrefixBasedPDDecider) Disaggregate(_ context.Context, req *fw.Request, decode *fw.Endpoint) bool {
	if d.NonCachedTokens == 0 || decode == nil {
		return false
	}
	input := 0
	if req.Body != nil {
		input = req.Body.Tokens.TokenCount()
	}
	if d.PromptTokens > 0 && input < d.PromptTokens {
		return false
	}
	if input < d.NonCachedTokens {
		return false
	}
	raw, ok := decode.Get(fw.PrefixCacheMatchInfoKey.String())
	info, isInfo := raw.(*fw.PrefixCacheMatchInfo)
	if !ok || !isInfo {
		return false
	}
	return input-info.CachedBlockCount*info.BlockSizeTokens >= d.NonCachedTokens
}

// AlwaysDecider is always-disagg-pd-decider.
type AlwaysDecider struct{ name string }

// NewAlwaysDecider builds the decider.
func NewAlwaysDecider(name string) *AlwaysDecider { return &AlwaysDecider{name: name} }

// TypedName implements fw.Plugin.
func (d *AlwaysDecider) TypedName() fw.TypedName {
	return fw.TypedName{Type: "always-disagg-pd-decider", Name: d.name}
}

// Disaggregate implements Decider.
func (d *AlwaysDecider) Disaggregate(context.Context, *fw.Request, *fw.Endpoint) bool { return true }

// Decision types (profilehandler/disagg/metrics.go).
const (
	DecisionDecodeOnly    = "decode-only"
	DecisionPrefillDecode = "prefill-decode"
)

// PrefillHeader carries the prefill endpoint to the decode sidecar.
const PrefillHeader = "x-prefiller-host-port"

// PeerEndpointAttribute is where the handler leaves the decode endpoint for
// the prefill profile.
const PeerEndpointAttribute = "peer-endpoint"

// DisaggHandler is disagg-profile-handler in its default decode-first stage
// order: run decode, ask the prefill decider with the chosen decode
// endpoint, run prefill when it says so, count the decision, and hand the
// prefill endpoint to the decode side in x-prefiller-host-port
// (profilehandler/disagg/disagg_profile_handler.go). Encode profiles and
// prefill-first order are not emulated.
type DisaggHandler struct {
	name            string
	decode, prefill string
	decider         Decider
	record          func(pluginName, pluginType, model, decision string)
}

// NewDisaggHandler is HandlerFactory; decider may be nil (P/D off).
func NewDisaggHandler(name string, p eppconfig.DisaggParameters, decider Decider, record func(string, string, string, string)) (*DisaggHandler, error) {
	if p.StageOrder == "prefill-first" {
		return nil, errors.New("the sim emulates disagg-profile-handler's decode-first stage order only")
	}
	return &DisaggHandler{name: name, decode: p.Profiles.Decode, prefill: p.Profiles.Prefill, decider: decider, record: record}, nil
}

// TypedName implements fw.Plugin.
func (h *DisaggHandler) TypedName() fw.TypedName {
	return fw.TypedName{Type: "disagg-profile-handler", Name: h.name}
}

// Consumes implements fw.Consumer: the default prefix match info and tokens.
func (h *DisaggHandler) Consumes() []fw.DataKey {
	return []fw.DataKey{fw.PrefixCacheMatchInfoKey, fw.TokenizedPromptKey}
}

// Pick implements fw.ProfileHandler (pickDecodeFirst).
func (h *DisaggHandler) Pick(ctx context.Context, req *fw.Request, profiles map[string]fw.Profile, results map[string]*fw.ProfileResult) map[string]fw.Profile {
	if _, done := results[h.decode]; !done {
		p, ok := profiles[h.decode]
		if !ok {
			return nil
		}
		return map[string]fw.Profile{h.decode: p}
	}
	dec := results[h.decode]
	if dec == nil || len(dec.TargetEndpoints) == 0 {
		return nil
	}
	if p, ok := profiles[h.prefill]; ok {
		if _, done := results[h.prefill]; !done {
			if h.decider != nil && h.decider.Disaggregate(ctx, req, dec.TargetEndpoints[0]) {
				req.PutAttribute(PeerEndpointAttribute, dec.TargetEndpoints[0])
				return map[string]fw.Profile{h.prefill: p}
			}
			results[h.prefill] = nil
		}
	}
	decision := DecisionDecodeOnly
	if results[h.prefill] != nil {
		decision = DecisionPrefillDecode
	}
	h.record(h.name, "disagg-profile-handler", req.TargetModel, decision)
	return nil
}

// ProcessResults keeps decode (primary) and a used prefill.
func (h *DisaggHandler) ProcessResults(_ context.Context, _ *fw.Request, results map[string]*fw.ProfileResult) (*fw.SchedulingResult, error) {
	dec := results[h.decode]
	if dec == nil || len(dec.TargetEndpoints) == 0 {
		return nil, errors.New("failed to find available decode workers")
	}
	out := map[string]*fw.ProfileResult{h.decode: dec}
	if pr := results[h.prefill]; pr != nil {
		out[h.prefill] = pr
	}
	return &fw.SchedulingResult{PrimaryProfileName: h.decode, ProfileResults: out}, nil
}

// PreRequest sets or clears x-prefiller-host-port.
func (h *DisaggHandler) PreRequest(_ context.Context, req *fw.Request, res *fw.SchedulingResult) error {
	delete(req.Headers, PrefillHeader)
	if pr := res.ProfileResults[h.prefill]; pr != nil && len(pr.TargetEndpoints) > 0 {
		m := pr.TargetEndpoints[0].Meta
		req.Headers[PrefillHeader] = net.JoinHostPort(m.Address, m.Port)
	}
	return nil
}
