package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/progress"
	"github.com/gpustack/routing-conformance/traffic"
)

// ChatPlan is the config's serial chat plan against dep: the shared
// prefix, streaming and non-streaming in turn. Every plan has a fresh
// nonce, so its prompts share nothing with earlier traffic on the same
// deployment.
func (in Spec) ChatPlan(ctx context.Context, dep clusters.Deployment, requests int) traffic.Plan {
	GinkgoHelper()
	base, err := dep.OpenAIBaseURL(ctx)
	Expect(err).NotTo(HaveOccurred())
	return traffic.Plan{
		BaseURL:        base,
		Model:          in.Config.Model.Name,
		Requests:       requests,
		Concurrency:    1,
		Mode:           traffic.ModeAlternate,
		MaxTokens:      in.Config.Traffic.MaxTokens,
		RequestTimeout: in.Config.Traffic.RequestTimeout.D(),
		Prompts:        traffic.PromptSet{Kind: traffic.PromptsSharedPrefix, PrefixChars: in.Config.Traffic.PrefixChars},
	}
}

// progressSink is this process's line to cmd/e2e's live traffic display;
// nil when the suite runs without it.
var progressSink = sync.OnceValue(func() *progress.Sink { return progress.Open(os.Getenv(config.EnvProgressFIFO)) })

// withProgress makes plan report its traffic as it goes: to cmd/e2e, which
// draws a live line per spec, or, when the suite runs without it, as a line
// of the spec's output every few seconds.
func withProgress(plan traffic.Plan) traffic.Plan {
	spec := specLabel(CurrentSpecReport())
	proc := GinkgoParallelProcess()
	sink := progressSink()
	if sink == nil {
		plan.ProgressEvery = 5 * time.Second
		plan.Progress = func(p traffic.Progress) {
			GinkgoWriter.Printf("traffic %s\n", progress.Event{Spec: spec, Done: p.Done, Total: p.Total, Errors: p.Errors, Elapsed: p.Elapsed, Final: p.Final})
		}
		return plan
	}
	plan.ProgressEvery = 500 * time.Millisecond
	plan.Progress = func(p traffic.Progress) {
		// A full pipe drops the line; the next one says the same and more.
		_ = sink.Send(progress.Event{Proc: proc, Spec: spec, Done: p.Done, Total: p.Total, Errors: p.Errors, Elapsed: p.Elapsed, Final: p.Final})
	}
	return plan
}

// specLabel names a spec in a progress line: "<claim> <pair>" from its
// labels, else its own text.
func specLabel(r SpecReport) string {
	var claim, router, engine string
	for _, l := range r.Labels() {
		key, value, _ := strings.Cut(l, ":")
		switch key {
		case "feature":
			claim = value
		case "router":
			router = value
		case "engine":
			engine = value
		}
	}
	if claim == "" || router == "" {
		return r.LeafNodeText
	}
	return claim + " " + router + "+" + engine
}

// Send runs plan within <claim>/traffic and fails on any failed request,
// naming the first ones; a run cut by that interval (a router that never
// answers) fails saying how many requests were left unanswered.
func (in Spec) Send(ctx context.Context, plan traffic.Plan) *traffic.Report {
	GinkgoHelper()
	endpoint := plan.Endpoint
	if endpoint == "" {
		endpoint = traffic.DefaultEndpoint
	}
	By(fmt.Sprintf("sending %d requests to %s (concurrency %d, %s, %s prompts of %d characters)", plan.Requests, endpoint,
		max(plan.Concurrency, 1), plan.Mode, plan.Prompts.Kind, plan.Prompts.PrefixChars))
	rep, err := in.RunTraffic(ctx, plan)
	Expect(err).NotTo(HaveOccurred(), func() string { return fmt.Sprint(err) })
	var bad []string
	for _, r := range rep.Results {
		if r.Class != traffic.ClassOK && len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("#%d %s status %d: %s %s", r.Index, r.Class, r.Status, r.Error, r.ErrorBody))
		}
	}
	sent := assertions.FailedRequests{Action: fmt.Sprintf("%d requests to %s", plan.Requests, endpoint), Requests: rep.Summary.Requests, Failed: rep.Summary.Failed, First: bad}
	Expect(sent).To(assertions.HaveFailedAtMost(0, "none", "nothing disrupts this traffic, so every request must succeed"))
	return rep
}

// RunTraffic runs plan within <claim>/traffic. A run the interval cuts
// short is an error that says so, with what was still unanswered; the
// report is returned either way.
func (in Spec) RunTraffic(ctx context.Context, plan traffic.Plan) (*traffic.Report, error) {
	GinkgoHelper()
	within := in.Interval(config.OpTraffic).Timeout.D()
	rctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	rep, err := traffic.Run(rctx, withProgress(plan))
	if err != nil && rep != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return rep, fmt.Errorf("traffic to %s did not finish within %s/%s (%s): %d of %d requests still unanswered or unsent, %d answered OK, %d failed (is the router answering?)",
			plan.BaseURL, in.Claim, config.OpTraffic, within, rep.Summary.Canceled, rep.Summary.Requests, rep.Summary.OK, rep.Summary.Failed)
	}
	return rep, err
}
