// Package scheduling is the EPP's scheduler: the filters, scorers, pickers,
// profile handlers and P/D deciders the operator's EndpointPickerConfig
// uses, and the profile run that clamps every score to [0,1] and sums
// weight × score without normalising (llm-d/llm-d-router@71f4f099:
// pkg/epp/scheduling/{scheduler,scheduler_profile}.go and
// pkg/epp/framework/plugins/scheduling/...).
package scheduling

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
)

// LabelSelector is label-selector-filter: keeps endpoints whose labels match
// a metav1.LabelSelector (filter/bylabel/selector.go).
type LabelSelector struct {
	name     string
	selector labels.Selector
}

// NewLabelSelector is SelectorFactory.
func NewLabelSelector(name string, dec *json.Decoder) (*LabelSelector, error) {
	var ls metav1.LabelSelector
	if dec != nil {
		if err := dec.Decode(&ls); err != nil {
			return nil, fmt.Errorf("failed to parse the parameters of the '%s' filter - %w", "label-selector-filter", err)
		}
	}
	if name == "" {
		return nil, fmt.Errorf("Selector: missing filter name") //nolint:staticcheck // the source's text
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, err
	}
	return &LabelSelector{name: name, selector: sel}, nil
}

// TypedName implements fw.Plugin.
func (f *LabelSelector) TypedName() fw.TypedName {
	return fw.TypedName{Type: "label-selector-filter", Name: f.name}
}

// Filter implements fw.Filter.
func (f *LabelSelector) Filter(_ context.Context, _ *fw.Request, eps []*fw.Endpoint) []*fw.Endpoint {
	out := []*fw.Endpoint{}
	for _, e := range eps {
		if f.selector.Matches(labels.Set(e.Meta.Labels)) {
			out = append(out, e)
		}
	}
	return out
}

// RoleLabel is the P/D role label the role filters read.
const RoleLabel = "llm-d.ai/role"

// RoleFilter is decode-filter, prefill-filter or encode-filter
// (filter/bylabel/roles.go): keeps endpoints whose llm-d.ai/role is one of
// the roles; decode-filter also keeps endpoints without the label.
type RoleFilter struct {
	typ, name    string
	roles        []string
	allowMissing bool
}

// NewRoleFilter builds the role filter of type typ.
func NewRoleFilter(typ, name string) *RoleFilter {
	f := &RoleFilter{typ: typ, name: name}
	switch typ {
	case "decode-filter":
		f.roles, f.allowMissing = []string{"decode", "prefill-decode", "both", "encode-prefill-decode"}, true
	case "prefill-filter":
		f.roles = []string{"prefill", "encode-prefill", "prefill-decode", "both", "encode-prefill-decode"}
	case "encode-filter":
		f.roles = []string{"encode", "encode-prefill", "encode-prefill-decode"}
	}
	return f
}

// TypedName implements fw.Plugin.
func (f *RoleFilter) TypedName() fw.TypedName { return fw.TypedName{Type: f.typ, Name: f.name} }

// Filter implements fw.Filter.
func (f *RoleFilter) Filter(_ context.Context, _ *fw.Request, eps []*fw.Endpoint) []*fw.Endpoint {
	out := []*fw.Endpoint{}
	for _, e := range eps {
		v, ok := e.Meta.Labels[RoleLabel]
		if (!ok && f.allowMissing) || (ok && slices.Contains(f.roles, v)) {
			out = append(out, e)
		}
	}
	return out
}

// QueueScorer is queue-scorer: min-max of the waiting queue across the
// candidates, (max−q)/(max−min), 1.0 for all when every queue is equal
// (scorer/queuedepth/queue.go).
type QueueScorer struct{ name string }

// NewQueueScorer builds the scorer; it takes no parameters.
func NewQueueScorer(name string) *QueueScorer { return &QueueScorer{name: name} }

// TypedName implements fw.Plugin.
func (s *QueueScorer) TypedName() fw.TypedName {
	return fw.TypedName{Type: "queue-scorer", Name: s.name}
}

// Score implements fw.Scorer.
func (s *QueueScorer) Score(_ context.Context, _ *fw.Request, eps []*fw.Endpoint) map[*fw.Endpoint]float64 {
	lo, hi := math.MaxInt, math.MinInt
	for _, e := range eps {
		q := e.Metrics.WaitingQueueSize
		lo, hi = min(lo, q), max(hi, q)
	}
	out := make(map[*fw.Endpoint]float64, len(eps))
	for _, e := range eps {
		if hi == lo {
			out[e] = 1.0
			continue
		}
		out[e] = float64(hi-e.Metrics.WaitingQueueSize) / float64(hi-lo)
	}
	return out
}

// KVCacheScorer is kv-cache-utilization-scorer: 1 − KVCacheUsagePercent
// (scorer/kvcacheutilization/kvcache_utilization.go).
type KVCacheScorer struct{ name string }

// NewKVCacheScorer builds the scorer; it takes no parameters.
func NewKVCacheScorer(name string) *KVCacheScorer { return &KVCacheScorer{name: name} }

// TypedName implements fw.Plugin.
func (s *KVCacheScorer) TypedName() fw.TypedName {
	return fw.TypedName{Type: "kv-cache-utilization-scorer", Name: s.name}
}

// Score implements fw.Scorer.
func (s *KVCacheScorer) Score(_ context.Context, _ *fw.Request, eps []*fw.Endpoint) map[*fw.Endpoint]float64 {
	out := make(map[*fw.Endpoint]float64, len(eps))
	for _, e := range eps {
		out[e] = 1 - e.Metrics.KVCacheUsagePercent
	}
	return out
}

// PrefixScorer is prefix-cache-scorer: matchBlocks/totalBlocks of the
// producer's PrefixCacheMatchInfo, optionally mixed with the squared match
// length (scorer/prefix/plugin.go); 0 when the info is missing.
type PrefixScorer struct {
	name        string
	key         fw.DataKey
	lengthW     float64
	lengthScale int
}

type prefixParams struct {
	PrefixMatchInfoProducerName string  `json:"prefixMatchInfoProducerName,omitempty"`
	MatchLengthWeight           float64 `json:"matchLengthWeight,omitempty"`
	MatchLengthScaleTokens      int     `json:"matchLengthScaleTokens,omitempty"`
}

// NewPrefixScorer is PrefixCachePluginFactory.
func NewPrefixScorer(name string, dec *json.Decoder) (*PrefixScorer, error) {
	p := prefixParams{MatchLengthScaleTokens: 8192}
	if dec != nil {
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("failed to decode prefix cache scorer parameters: %w", err)
		}
	}
	if p.MatchLengthWeight < 0 || p.MatchLengthWeight > 1 {
		return nil, fmt.Errorf("matchLengthWeight must be between 0.0 and 1.0, got %f", p.MatchLengthWeight)
	}
	if p.MatchLengthWeight > 0 && p.MatchLengthScaleTokens <= 0 {
		return nil, fmt.Errorf("matchLengthScaleTokens must be greater than 0 when matchLengthWeight is greater than 0, got %d", p.MatchLengthScaleTokens)
	}
	return &PrefixScorer{name: name, key: fw.PrefixCacheMatchInfoKey.WithNonEmptyProducerName(p.PrefixMatchInfoProducerName),
		lengthW: p.MatchLengthWeight, lengthScale: p.MatchLengthScaleTokens}, nil
}

// TypedName implements fw.Plugin.
func (s *PrefixScorer) TypedName() fw.TypedName {
	return fw.TypedName{Type: "prefix-cache-scorer", Name: s.name}
}

// Consumes implements fw.Consumer: the producer's match info.
func (s *PrefixScorer) Consumes() []fw.DataKey { return []fw.DataKey{s.key} }

// Score implements fw.Scorer.
func (s *PrefixScorer) Score(_ context.Context, _ *fw.Request, eps []*fw.Endpoint) map[*fw.Endpoint]float64 {
	out := make(map[*fw.Endpoint]float64, len(eps))
	for _, e := range eps {
		out[e] = 0
		raw, ok := e.Get(s.key.String())
		info, isInfo := raw.(*fw.PrefixCacheMatchInfo)
		if !ok || !isInfo || info.TotalBlocks == 0 {
			continue
		}
		ratio := float64(info.MatchBlocks) / float64(info.TotalBlocks)
		length := 0.0
		if s.lengthW > 0 && info.BlockSizeTokens > 0 {
			n := math.Min(1, float64(info.MatchBlocks)*float64(info.BlockSizeTokens)/float64(s.lengthScale))
			length = n * n
		}
		out[e] = s.lengthW*length + (1-s.lengthW)*ratio
	}
	return out
}

// Rand is the pickers' shared random source (picker/common.go PickerRand):
// a PCG seeded (seed, seed^0x9e3779b97f4a7c15). The real EPP seeds from the
// clock; the sim takes the seed so a run can be replayed.
type Rand struct {
	mu   sync.Mutex
	seed uint64
	r    *rand.Rand
}

// NewRand seeds the source.
func NewRand(seed uint64) *Rand {
	return &Rand{seed: seed, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Seed is the seed the source started from.
func (r *Rand) Seed() uint64 { return r.seed }

// Shuffle shuffles n items.
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	r.mu.Lock()
	r.r.Shuffle(n, swap)
	r.mu.Unlock()
}

// IntN returns a value in [0, n).
func (r *Rand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.IntN(n)
}

type pickerParams struct {
	MaxNumOfEndpoints int `json:"maxNumOfEndpoints"`
}

// picker holds what max-score-picker and random-picker share: the
// maxNumOfEndpoints parameter (default 1, picker/common.go) and the shuffle
// that breaks ties.
type picker struct {
	typ, name string
	max       int
	rand      *Rand
}

func newPicker(typ, name string, dec *json.Decoder, r *Rand) (picker, error) {
	p := pickerParams{MaxNumOfEndpoints: 1}
	if dec != nil {
		if err := dec.Decode(&p); err != nil {
			return picker{}, fmt.Errorf("failed to parse the parameters of the '%s' picker - %w", typ, err)
		}
	}
	if p.MaxNumOfEndpoints <= 0 {
		p.MaxNumOfEndpoints = 1
	}
	return picker{typ: typ, name: name, max: p.MaxNumOfEndpoints, rand: r}, nil
}

// TypedName implements fw.Plugin.
func (p *picker) TypedName() fw.TypedName {
	return fw.TypedName{Type: p.typ, Name: p.name}
}

func (p *picker) shuffle(scored []*fw.ScoredEndpoint) {
	p.rand.Shuffle(len(scored), func(i, j int) { scored[i], scored[j] = scored[j], scored[i] })
}

// result keeps the first maxNumOfEndpoints of the ordered candidates.
func (p *picker) result(scored []*fw.ScoredEndpoint) *fw.ProfileResult {
	if p.max < len(scored) {
		scored = scored[:p.max]
	}
	out := &fw.ProfileResult{}
	for _, s := range scored {
		out.TargetEndpoints = append(out.TargetEndpoints, s.Endpoint)
	}
	return out
}

// MaxScorePicker is max-score-picker: shuffle (random tie-break), stable
// sort by score descending, keep maxNumOfEndpoints (picker/maxscore/picker.go).
type MaxScorePicker struct{ picker }

// NewMaxScorePicker is MaxScorePickerFactory.
func NewMaxScorePicker(name string, dec *json.Decoder, r *Rand) (*MaxScorePicker, error) {
	p, err := newPicker("max-score-picker", name, dec, r)
	if err != nil {
		return nil, err
	}
	return &MaxScorePicker{p}, nil
}

// Pick implements fw.Picker.
func (p *MaxScorePicker) Pick(_ context.Context, scored []*fw.ScoredEndpoint) *fw.ProfileResult {
	p.shuffle(scored)
	slices.SortStableFunc(scored, func(a, b *fw.ScoredEndpoint) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return p.result(scored)
}

// RandomPicker is random-picker: shuffle, keep maxNumOfEndpoints.
type RandomPicker struct{ picker }

// NewRandomPicker is RandomPickerFactory.
func NewRandomPicker(name string, dec *json.Decoder, r *Rand) (*RandomPicker, error) {
	p, err := newPicker("random-picker", name, dec, r)
	if err != nil {
		return nil, err
	}
	return &RandomPicker{p}, nil
}

// Pick implements fw.Picker.
func (p *RandomPicker) Pick(_ context.Context, scored []*fw.ScoredEndpoint) *fw.ProfileResult {
	p.shuffle(scored)
	return p.result(scored)
}
