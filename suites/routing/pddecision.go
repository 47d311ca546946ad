package routing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimPDDecision: llm-d-router decides per request whether to split it
// between a prefill and a decode endpoint: a prompt short enough to be
// mostly cached is served by the decode endpoint alone.
const ClaimPDDecision = "pddecision"

// PDDecisionRow is what pddecision's rows state.
type PDDecisionRow struct {
	PD     PDShape `json:"pd"`
	Disagg Disagg  `json:"disagg"`
	// Scorers are the prefill and decode profiles' weights.
	Scorers []Scorer `json:"scorers"`
	// Series count the decisions.
	Series []fixtures.Series `json:"series"`
}

// Disagg is what llm-d-router's prefix-based-pd-decider decides per request
// (docs/llmd.md#disaggregated-prefill-and-decode): a request whose prompt
// tokens not cached on the chosen decode endpoint reach Threshold is split
// (prefill-decode), any other is served by the decode endpoint alone
// (decode-only).
type Disagg struct {
	// Threshold is the decider's nonCachedTokens as the operator renders it
	// (disaggregationThresholdTokens, default 8).
	Threshold int `json:"threshold"`
	// ShortPrompt is a completions prompt of fewer tokens than Threshold,
	// sent Requests times: decode-only every time.
	ShortPrompt string `json:"shortPrompt"`
	// LongChars is the length of the unrelated completions prompts sent
	// Requests times after the short ones: prefill-decode every time.
	LongChars int `json:"longChars"`
	Requests  int `json:"requests"`
}

// Check implements yamlbind.Checker.
func (d Disagg) Check() []string {
	if d.Requests < 1 || d.ShortPrompt == "" || d.LongChars < 1 || d.Threshold < 1 {
		return []string{"disagg needs threshold, shortPrompt, longChars and requests, each above 0"}
	}
	return nil
}

var _ = framework.Add(Registry, framework.Claim[PDDecisionRow]{
	Name:  ClaimPDDecision,
	Title: "Prefill/decode decision per request",
	Asserts: "llm-d-router: the rendered prefill/decode profiles and `prefix-based-pd-decider` " +
		"(`nonCachedTokens` 8); short completions are `decode-only`, long unrelated ones `prefill-decode`, counted by " +
		"`llm_d_epp_disagg_decision_total{decision_type}` and by the engines each reaches",
	PD:          true,
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	Cases:       func(row fixtures.Row, r PDDecisionRow) []framework.Case { return r.PD.shared(row.RouterArgs) },
	Specs:       PDDecisionSpec,
})

// PDDecisionSpec: the operator renders llm-d-router's prefill and decode
// scheduling profiles and the prefix-based-pd-decider with nonCachedTokens
// = disaggregationThresholdTokens (8 unset); disagg.requests completions
// with a prompt under the threshold are decode-only (the decode engine
// serves them alone), as many with long unrelated prompts are split
// (prefill-decode: one prefill and one decode engine request each); each
// decision counts in llm_d_epp_disagg_decision_total{decision_type}
// (docs/llmd.md#disaggregated-prefill-and-decode, docs/operator.md#llm-d-scoring-configuration).
func PDDecisionSpec(input func() framework.Input[PDDecisionRow]) {
	framework.CheckInput("PDDecisionSpec", input)
	var in framework.Input[PDDecisionRow]
	BeforeEach(func() {
		in = input()
		in.Begin()
	})

	It("serves a short prompt on the decode endpoint alone and splits a long one", func(ctx SpecContext) {
		d := in.Expect.Disagg
		dep := in.Ready(ctx)

		By("reading the profiles and the decider from the epp's effective configuration")
		cfg := assertions.SchedulingConfig{Effective: effectiveConfig(ctx, in.Spec, dep)}
		decider := fmt.Sprintf(`Type: prefix-based-pd-decider, Parameters: \{[^}]*"nonCachedTokens":\s*%d\b`, d.Threshold)

		prefill, decode := pools(ctx, dep, in.Expect.PD)
		routerBefore := framework.RouterMetrics(ctx, dep)
		before := framework.ScrapeEngines(ctx, dep, poolOf("", prefill, decode))
		base, err := dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())

		By(fmt.Sprintf("sending %d completions of %q, then %d of %d unrelated characters", d.Requests, d.ShortPrompt, d.Requests, d.LongChars))
		for i := 0; i < d.Requests; i++ {
			Expect(postCompletion(ctx, base, in.Config.Model.Name, d.ShortPrompt, in.Config.Traffic.MaxTokens)).To(Succeed(), "short completion %d", i)
		}
		long := in.ChatPlan(ctx, dep, d.Requests)
		long.Endpoint, long.Mode = traffic.EndpointCompletions, traffic.ModeNonStream
		long.Prompts = traffic.PromptSet{Kind: traffic.PromptsUnrelated, PrefixChars: d.LongChars}
		in.Send(ctx, long)

		// Only the split requests reach a prefill engine; every request
		// reaches a decode engine.
		preSplit := in.MeasureSplit(ctx, dep, prefill, before, d.Requests)
		decSplit := in.MeasureSplit(ctx, dep, decode, before, 2*d.Requests)
		in.RecordSplit(fmt.Sprintf("prefill pool: %d short and %d long completions", d.Requests, d.Requests),
			preSplit, prefill, 2*d.Requests, 0, fmt.Sprintf("%d in all (the long ones)", d.Requests))
		in.RecordSplit(fmt.Sprintf("decode pool: %d short and %d long completions", d.Requests, d.Requests),
			decSplit, decode, 2*d.Requests, 0, fmt.Sprintf("%d in all", 2*d.Requests))

		measured := []string{fmt.Sprintf("prefill engines +%d, decode engines +%d", preSplit.Total(), decSplit.Total())}
		var readings []framework.Reading
		for _, s := range in.Expect.Series {
			words, r := in.SeriesDelta(ctx, dep, routerBefore, s, poolOf(s.Pool, prefill, decode), d.Requests)
			measured = append(measured, words)
			readings = append(readings, r)
		}
		in.Record(in.Row.Summary, strings.Join(measured, "; "))
		Expect(cfg).To(assertions.HaveSchedulingWeights(weights(in.Expect.Scorers)...))
		Expect(cfg.Effective).To(MatchRegexp(decider), "the effective configuration's prefix-based-pd-decider with nonCachedTokens %d", d.Threshold)
		for _, r := range readings {
			r.Expect()
		}
	})
}

// postCompletion sends one non-streaming /v1/completions request with a
// fixed prompt and fails unless it answers 200.
func postCompletion(ctx context.Context, base, model, prompt string, maxTokens int) error {
	body, err := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": max(maxTokens, 1)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s/completions: %d %s", base, resp.StatusCode, b)
	}
	return nil
}
