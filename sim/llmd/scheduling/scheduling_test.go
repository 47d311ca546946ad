package scheduling_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/llmd/eppconfig"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/scheduling"
)

func ep(name string, queue int, kv float64, labels map[string]string) *fw.Endpoint {
	return fw.NewEndpoint(&fw.EndpointMetadata{Namespace: "ns", Name: name + "-rank-0", PodName: name, Address: "10.0.0.1", Port: "8000", Labels: labels},
		fw.Metrics{WaitingQueueSize: queue, KVCacheUsagePercent: kv})
}

func dec(s string) *json.Decoder { return eppconfig.StrictDecoder(json.RawMessage(s)) }

func TestQueueScorerIsMinMaxAcrossCandidates(t *testing.T) {
	a, b, c := ep("a", 0, 0, nil), ep("b", 5, 0, nil), ep("c", 10, 0, nil)
	s := scheduling.NewQueueScorer("q").Score(context.Background(), nil, []*fw.Endpoint{a, b, c})
	if s[a] != 1 || s[b] != 0.5 || s[c] != 0 {
		t.Fatalf("(max−q)/(max−min): %v %v %v", s[a], s[b], s[c])
	}
	eq := scheduling.NewQueueScorer("q").Score(context.Background(), nil, []*fw.Endpoint{ep("x", 3, 0, nil), ep("y", 3, 0, nil)})
	for _, v := range eq {
		if v != 1 {
			t.Fatalf("equal queues score 1.0 each, got %v", eq)
		}
	}
}

func TestKVCacheScorerIsOneMinusUsage(t *testing.T) {
	a := ep("a", 0, 0.25, nil)
	if s := scheduling.NewKVCacheScorer("k").Score(context.Background(), nil, []*fw.Endpoint{a}); s[a] != 0.75 {
		t.Fatalf("1 − 0.25 = %v", s[a])
	}
}

// fixed is a scorer returning set scores.
type fixed map[string]float64

func (f fixed) TypedName() fw.TypedName { return fw.TypedName{Type: "fixed", Name: "fixed"} }
func (f fixed) Score(_ context.Context, _ *fw.Request, eps []*fw.Endpoint) map[*fw.Endpoint]float64 {
	out := map[*fw.Endpoint]float64{}
	for _, e := range eps {
		out[e] = f[e.Meta.PodName]
	}
	return out
}

func TestScoresAreClampedThenWeightedNotNormalised(t *testing.T) {
	a, b := ep("a", 0, 0, nil), ep("b", 0, 0, nil)
	var raw []float64
	totals := scheduling.Totals(context.Background(), nil, []*fw.Endpoint{a, b}, []eppconfig.WeightedScorer{
		{Scorer: fixed{"a": 1.7, "b": -0.4}, Weight: 2},
		{Scorer: fixed{"a": 0.5, "b": 1}, Weight: 3},
	}, nil, func(_ fw.TypedName, e *fw.Endpoint, v float64) { raw = append(raw, v) })
	// a: clamp(1.7)=1 ×2 + 0.5×3 = 3.5; b: clamp(−0.4)=0 ×2 + 1×3 = 3. The
	// weights sum to 5 and are not divided out.
	if totals[a] != 3.5 || totals[b] != 3 {
		t.Fatalf("totals a=%v b=%v", totals[a], totals[b])
	}
	// The DEBUG log sees the raw scores, before clamping.
	slices.Sort(raw)
	if !slices.Equal(raw, []float64{-0.4, 0.5, 1, 1.7}) {
		t.Fatalf("logged raw scores %v", raw)
	}
}

func scored(eps ...*fw.Endpoint) []*fw.ScoredEndpoint {
	var out []*fw.ScoredEndpoint
	for i, e := range eps {
		out = append(out, &fw.ScoredEndpoint{Endpoint: e, Score: float64(len(eps) - i)})
	}
	return out
}

func TestMaxScorePickerTakesTheHighestTotal(t *testing.T) {
	p, err := scheduling.NewMaxScorePicker("p", nil, scheduling.NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	a, b := ep("a", 0, 0, nil), ep("b", 0, 0, nil)
	for i := 0; i < 50; i++ {
		if got := p.Pick(context.Background(), scored(a, b)).TargetEndpoints; len(got) != 1 || got[0] != a {
			t.Fatalf("the strict max must win: %v", got)
		}
	}
}

func TestMaxScorePickerBreaksTiesAtRandomReproduciblyBySeed(t *testing.T) {
	a, b, c := ep("a", 0, 0, nil), ep("b", 0, 0, nil), ep("c", 0, 0, nil)
	picks := func(seed uint64) string {
		p, _ := scheduling.NewMaxScorePicker("p", nil, scheduling.NewRand(seed))
		var sb strings.Builder
		for i := 0; i < 60; i++ {
			tie := []*fw.ScoredEndpoint{{Endpoint: a, Score: 7}, {Endpoint: b, Score: 7}, {Endpoint: c, Score: 7}}
			sb.WriteString(p.Pick(context.Background(), tie).TargetEndpoints[0].Meta.PodName)
		}
		return sb.String()
	}
	s1, s2, s3 := picks(9), picks(9), picks(10)
	if s1 != s2 {
		t.Fatal("the same seed must replay the same tie-breaks")
	}
	if s1 == s3 {
		t.Fatal("another seed should break ties differently")
	}
	for _, n := range "abc" {
		if c := strings.Count(s1, string(n)); c < 10 {
			t.Fatalf("tie-break not uniform-ish: %q", s1)
		}
	}
}

func TestMaxScorePickerKeepsMaxNumOfEndpoints(t *testing.T) {
	p, err := scheduling.NewMaxScorePicker("p", dec(`{"maxNumOfEndpoints":2}`), scheduling.NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := ep("a", 0, 0, nil), ep("b", 0, 0, nil), ep("c", 0, 0, nil)
	got := p.Pick(context.Background(), scored(a, b, c)).TargetEndpoints
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("top two by score: %v", got)
	}
	if _, err := scheduling.NewMaxScorePicker("p", dec(`{"maxEndpoints":2}`), scheduling.NewRand(1)); err == nil ||
		err.Error() != `failed to parse the parameters of the 'max-score-picker' picker - json: unknown field "maxEndpoints"` {
		t.Fatalf("strict parameters: %v", err)
	}
}

func TestPrefixScorerIsMatchRatioOfTheNamedProducer(t *testing.T) {
	s, err := scheduling.NewPrefixScorer("p", dec(`{"prefixMatchInfoProducerName":"precise-prefix-cache-producer"}`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := ep("a", 0, 0, nil), ep("b", 0, 0, nil)
	a.Put("PrefixCacheMatchInfoDataKey/precise-prefix-cache-producer", fw.NewPrefixCacheMatchInfo(3, 4, 16))
	b.Put("PrefixCacheMatchInfoDataKey/approx-prefix-cache-producer", fw.NewPrefixCacheMatchInfo(4, 4, 64))
	got := s.Score(context.Background(), nil, []*fw.Endpoint{a, b})
	if got[a] != 0.75 || got[b] != 0 {
		t.Fatalf("match/total from the named producer only: a=%v b=%v", got[a], got[b])
	}
	w, _ := scheduling.NewPrefixScorer("p", dec(`{"matchLengthWeight":0.5,"matchLengthScaleTokens":100}`))
	c := ep("c", 0, 0, nil)
	c.Put("PrefixCacheMatchInfoDataKey/approx-prefix-cache-producer", fw.NewPrefixCacheMatchInfo(1, 2, 64))
	// 0.5 × min(1, 64/100)² + 0.5 × 1/2
	if v := w.Score(context.Background(), nil, []*fw.Endpoint{c})[c]; math.Abs(v-(0.5*0.64*0.64+0.25)) > 1e-12 {
		t.Fatalf("match length mix: %v", v)
	}
}

func TestRoleFiltersKeepTheirRolesAndDecodeKeepsUnlabelled(t *testing.T) {
	role := func(r string) map[string]string { return map[string]string{scheduling.RoleLabel: r} }
	eps := []*fw.Endpoint{ep("d", 0, 0, role("decode")), ep("p", 0, 0, role("prefill")), ep("both", 0, 0, role("both")), ep("none", 0, 0, nil)}
	names := func(in []*fw.Endpoint) string {
		var s []string
		for _, e := range in {
			s = append(s, e.Meta.PodName)
		}
		return strings.Join(s, ",")
	}
	if got := names(scheduling.NewRoleFilter("decode-filter", "d").Filter(context.Background(), nil, eps)); got != "d,both,none" {
		t.Errorf("decode-filter: %s", got)
	}
	if got := names(scheduling.NewRoleFilter("prefill-filter", "p").Filter(context.Background(), nil, eps)); got != "p,both" {
		t.Errorf("prefill-filter: %s", got)
	}
	ls, err := scheduling.NewLabelSelector("server-pods", dec(`{"matchLabels":{"llm-d.ai/role":"prefill"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ls.Filter(context.Background(), nil, eps)); got != "p" {
		t.Errorf("label-selector-filter: %s", got)
	}
}

func TestPrefixBasedDeciderSplitsOnUncachedTokens(t *testing.T) {
	d, err := scheduling.NewPrefixBasedPDDecider("d", dec(`{"nonCachedTokens":8,"promptTokens":0}`))
	if err != nil {
		t.Fatal(err)
	}
	req := func(n int) *fw.Request {
		return &fw.Request{Body: &fw.RequestBody{Tokens: &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{make([]uint32, n)}}}}
	}
	decode := ep("d", 0, 0, nil)
	decode.Put(fw.PrefixCacheMatchInfoKey.String(), fw.NewPrefixCacheMatchInfo(1, 2, 64))
	if d.Disaggregate(context.Background(), req(70), decode) {
		t.Error("70 tokens − 64 cached = 6 < 8: decode only")
	}
	if !d.Disaggregate(context.Background(), req(72), decode) {
		t.Error("72 − 64 = 8 ≥ 8: prefill-decode")
	}
	if d.Disaggregate(context.Background(), req(7), ep("x", 0, 0, nil)) {
		t.Error("a prompt shorter than nonCachedTokens never splits")
	}
	off, _ := scheduling.NewPrefixBasedPDDecider("off", dec(`{"nonCachedTokens":0}`))
	if off.Disaggregate(context.Background(), req(1000), ep("x", 0, 0, nil)) {
		t.Error("nonCachedTokens 0 disables P/D")
	}
	if _, err := scheduling.NewPrefixBasedPDDecider("bad", dec(`{"nonCachedTokens":-1}`)); err == nil ||
		!strings.Contains(err.Error(), "nonCachedTokens parameter of prefix disaggregation decider cannot be negative") {
		t.Errorf("negative threshold: %v", err)
	}
}

func TestFilterThatEmptiesTheSetFailsTheProfile(t *testing.T) {
	ls, _ := scheduling.NewLabelSelector("decode-pods", dec(`{"matchLabels":{"role":"decode"}}`))
	picker, _ := scheduling.NewMaxScorePicker("p", nil, scheduling.NewRand(1))
	single := scheduling.NewSingleHandler("single-profile-handler")
	s := scheduling.NewScheduler(&eppconfig.Loaded{Handler: single, Profiles: map[string]*eppconfig.ProfileSpec{
		"decode": {Name: "decode", Filters: []fw.Filter{ls}, Picker: picker}}}, nil)
	_, err := s.Schedule(context.Background(), &fw.Request{RequestID: "r"}, []*fw.Endpoint{ep("a", 0, 0, nil)})
	if err == nil || err.Error() != "failed to run scheduler profile 'decode'" {
		t.Fatalf("single handler on a failed profile: %v", err)
	}
}
