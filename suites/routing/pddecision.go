package routing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimPDDecision: llm-d-router decides per request whether to split it
// between a prefill and a decode endpoint.
const ClaimPDDecision = "pddecision"

var _ = register(Claim{
	Name:        ClaimPDDecision,
	Title:       "Prefill/decode decision per request",
	PD:          true,
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		d := e.Disagg
		out := need(nil, e.PD != nil && d != nil && d.Requests > 0 && d.ShortPrompt != "" && d.LongChars > 0 && d.Threshold > 0,
			"pddecision needs pd and disagg (threshold, shortPrompt, longChars, requests)")
		return need(out, len(e.Scorers) > 0 && len(e.Series) > 0, "pddecision needs scorers and series")
	},
	Deployment: documentedArgs,
	Spec: func(_ api.Pair, input func() Input) {
		PDDecisionSpec(func() PDSpecInput { return PDSpecInput{Input: input()} })
	},
})

// PDDecisionSpec: the operator renders llm-d-router's prefill and decode
// scheduling profiles and the prefix-based-pd-decider with nonCachedTokens
// = disaggregationThresholdTokens (8 unset); disagg.requests completions
// with a prompt under the threshold are decode-only (the decode engine
// serves them alone), as many with long unrelated prompts are split
// (prefill-decode: one prefill and one decode engine request each); each
// decision counts in llm_d_epp_disagg_decision_total{decision_type}
// (docs/llmd.md#disaggregated-prefill-and-decode, docs/operator.md#llm-d-scoring-configuration).
func PDDecisionSpec(input func() PDSpecInput) {
	var (
		in  Input
		exp fixtures.Expectation
	)
	BeforeEach(func() {
		in = input().Input
		exp = in.begin("PDDecisionSpec", ClaimPDDecision)
	})

	It("serves a short prompt on the decode endpoint alone and splits a long one", func(ctx SpecContext) {
		d := *exp.Disagg
		dep := in.readyPD(ctx, ClaimPDDecision, exp)

		By("reading the profiles and the decider from the epp's effective configuration")
		cfg := effectiveConfig(ctx, in.Target, ClaimPDDecision, dep)
		var missing, found []string
		for _, s := range exp.Scorers {
			want := fmt.Sprintf("{PluginRef: %s, Weight: %.2f}", s.Plugin, s.Weight)
			i := strings.Index(cfg, fmt.Sprintf("{Name: %s, Plugins: [", s.Profile))
			if j := strings.Index(cfg[max(i, 0):], "]}"); i < 0 || j < 0 || !strings.Contains(cfg[i:i+j], want) {
				missing = append(missing, s.Profile+": "+want)
				continue
			}
			found = append(found, fmt.Sprintf("%s %s %.0f", s.Profile, s.Plugin, s.Weight))
		}
		decider := regexp.MustCompile(fmt.Sprintf(`Type: prefix-based-pd-decider, Parameters: \{[^}]*"nonCachedTokens":\s*%d\b`, d.Threshold))
		if decider.MatchString(cfg) {
			found = append(found, fmt.Sprintf("prefix-based-pd-decider nonCachedTokens %d", d.Threshold))
		} else {
			missing = append(missing, fmt.Sprintf("prefix-based-pd-decider with nonCachedTokens %d", d.Threshold))
		}

		prefill, decode := pools(ctx, dep, *exp.PD)
		routerBefore := routerMetrics(ctx, dep)
		before := scrapeEngines(ctx, dep, poolOf("", prefill, decode))
		base, err := dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())

		By(fmt.Sprintf("sending %d completions of %q, then %d of %d unrelated characters", d.Requests, d.ShortPrompt, d.Requests, d.LongChars))
		for i := 0; i < d.Requests; i++ {
			Expect(postCompletion(ctx, base, in.Config.Model.Name, d.ShortPrompt, in.Config.Traffic.MaxTokens)).To(Succeed(), "short completion %d", i)
		}
		long := in.plan(ctx, dep, d.Requests)
		long.Endpoint, long.Mode = traffic.EndpointCompletions, traffic.ModeNonStream
		long.Prompts = traffic.PromptSet{Kind: traffic.PromptsUnrelated, PrefixChars: d.LongChars}
		in.send(ctx, ClaimPDDecision, long)

		// Only the split requests reach a prefill engine; every request
		// reaches a decode engine.
		preSplit := in.measureSplit(ctx, ClaimPDDecision, dep, in.Pair, prefill, before, d.Requests)
		decSplit := in.measureSplit(ctx, ClaimPDDecision, dep, in.Pair, decode, before, 2*d.Requests)
		report.Record(splitEntry(ClaimPDDecision, in.Pair, fmt.Sprintf("prefill pool: %d short and %d long completions", d.Requests, d.Requests),
			preSplit, prefill, 2*d.Requests, 0, fmt.Sprintf("%d in all (the long ones)", d.Requests)))
		report.Record(splitEntry(ClaimPDDecision, in.Pair, fmt.Sprintf("decode pool: %d short and %d long completions", d.Requests, d.Requests),
			decSplit, decode, 2*d.Requests, 0, fmt.Sprintf("%d in all", 2*d.Requests)))

		measured := []string{strings.Join(found, ", "), fmt.Sprintf("prefill engines +%d, decode engines +%d", preSplit.Total(), decSplit.Total())}
		var readings []reading
		for _, s := range exp.Series {
			words, r := in.seriesDelta(ctx, ClaimPDDecision, dep, routerBefore, s, poolOf(s.Pool, prefill, decode), d.Requests)
			measured = append(measured, words)
			readings = append(readings, r)
		}
		report.Record(report.Claim{Claim: ClaimPDDecision, Pair: in.Pair.String(), Expected: exp.Summary, Measured: strings.Join(measured, "; ")})
		Expect(missing).To(BeEmpty(), "missing from the effective configuration: %s", cfg)
		for _, r := range readings {
			r.expect()
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
