package routing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	openai "github.com/sashabaranov/go-openai"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
)

// ClaimModels: GET /v1/models through the router Service, what every
// OpenAI client asks first, answers with the served model name on every
// pair, however the router builds the answer: vllm-router relays its first
// worker's, sglang-gateway lists its registry, llm-d-router's picker sends
// the bodiless GET to a random engine. The spec asks through an OpenAI
// client (go-openai's ListModels), each time on a new connection, and
// asserts every answer: status 200, exactly the served model listed, and
// who built it (owned_by) with the content type it came with.
const ClaimModels = "models"

// ModelsRow is what models' rows state.
type ModelsRow struct {
	// Requests is how many GETs are sent, each on a new connection.
	Requests int `json:"requests"`
	// OwnedBy is data[].owned_by of every answer: the engine's ("vllm",
	// "sglang") where the router relays an engine's list, "local" where it
	// builds the list itself.
	OwnedBy string `json:"ownedBy"`
	// ContentType is the Content-Type every answer comes with.
	ContentType string `json:"contentType"`
}

// Check implements yamlbind.Checker.
func (r ModelsRow) Check() []string {
	if r.Requests < 1 {
		return []string{"requests must be at least 1"}
	}
	return nil
}

var _ = framework.Add(Registry, framework.Claim[ModelsRow]{
	Name:  ClaimModels,
	Title: "Models listed through the router",
	Asserts: "`GET /v1/models` through the router Service, as an OpenAI client asks it, each on a new connection: 200 " +
		"and exactly the served model name on every pair; `owned_by` and the content type say who answered (vllm-router " +
		"relays its first worker's list, sglang-gateway lists its registry as `text/plain`, llm-d-router sends the " +
		"bodiless GET to a random engine)",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	// The default deployment: a GET of the model list changes no routing
	// state, and no other claim's outcome depends on one.
	Specs: func(input func() framework.Input[ModelsRow]) {
		ModelsSpec(func() ModelsSpecInput { return ModelsSpecInput{Input: input()} })
	},
})

// ModelsSpecInput is the input of ModelsSpec.
type ModelsSpecInput struct {
	framework.Input[ModelsRow]
}

// ModelsSpec: the row's GETs of /v1/models through the router Service,
// each by go-openai's ListModels on a new connection; every answer is 200
// with exactly the served model (model.name) listed, owned_by and
// Content-Type as the row states.
func ModelsSpec(input func() ModelsSpecInput) {
	var in ModelsSpecInput
	BeforeEach(func() {
		in = input()
		in.Begin("ModelsSpec")
	})

	It("lists the served model through the router Service, as an OpenAI client asks", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		base, err := dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())
		n := in.Expect.Requests
		By(fmt.Sprintf("listing the models %d times through %s, a new connection each", n, base))
		tctx, cancel := context.WithTimeout(ctx, in.Interval(config.OpTraffic).Timeout.D())
		defer cancel()
		var answers []assertions.Answer
		seen := map[string]int{}
		for i := range n {
			a := listModels(tctx, base, in.Config.Traffic.RequestTimeout.D())
			a.Request = fmt.Sprintf("GET /v1/models #%d", i+1)
			answers = append(answers, a)
			seen[fmt.Sprintf("%d %s", a.Status, fieldWords(a.Fields))]++
		}
		var measured []string
		for _, k := range slices.Sorted(maps.Keys(seen)) {
			measured = append(measured, fmt.Sprintf("%d× %s", seen[k], k))
		}
		in.Record(in.Row.Summary, strings.Join(measured, "; "))
		Expect(answers).To(assertions.HaveAllAnswered(http.StatusOK, map[string]string{
			"data[].id": in.Config.Model.Name, "data[].owned_by": in.Expect.OwnedBy, "content-type": in.Expect.ContentType,
		}), "GET /v1/models through the router Service")
	})
}

// listModels asks base for its models as an OpenAI client does, on a
// connection of its own.
func listModels(ctx context.Context, base string, timeout time.Duration) assertions.Answer {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = base
	cfg.HTTPClient = &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	list, err := openai.NewClientWithConfig(cfg).ListModels(ctx)
	a := assertions.Answer{Status: http.StatusOK, Fields: map[string]string{}}
	if err != nil {
		var apiErr *openai.APIError
		var reqErr *openai.RequestError
		switch {
		case errors.As(err, &apiErr):
			a.Status = apiErr.HTTPStatusCode
		case errors.As(err, &reqErr):
			a.Status = reqErr.HTTPStatusCode
		default:
			a.Status = 0
		}
		a.Fields["error"] = err.Error()
		return a
	}
	var ids, owners []string
	for _, m := range list.Models {
		ids = append(ids, m.ID)
		owners = append(owners, m.OwnedBy)
	}
	a.Fields["data[].id"] = strings.Join(ids, ",")
	a.Fields["data[].owned_by"] = strings.Join(slices.Compact(owners), ",")
	a.Fields["content-type"] = list.Header().Get("Content-Type")
	return a
}

// fieldWords is an answer's fields as key=value, in key order.
func fieldWords(fields map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, fields[k]))
	}
	return strings.Join(parts, " ")
}
