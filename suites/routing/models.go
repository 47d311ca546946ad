package routing

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimModels: GET /v1/models through the router Service, what every
// OpenAI client asks first, answers with the served model name on every
// pair, however the router builds the answer: vllm-router relays its first
// worker's, sglang-gateway lists its registry, llm-d-router's picker sends
// the bodiless GET to a random engine. The spec asks as an OpenAI client
// does, through the traffic driver (the GET go-openai's ListModels sends,
// its answer read into go-openai's ModelsList), each time on a new
// connection, and asserts every answer: status 200, exactly the served
// model listed, and who built it (owned_by) with the content type it came
// with.
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
	Specs: ModelsSpec,
})

// ModelsSpec: the row's GETs of /v1/models through the router Service,
// sent by the traffic driver (EndpointModels: go-openai's ListModels GET),
// within models/traffic, each on a new connection; every answer is 200
// with exactly the served model (model.name) listed, owned_by and
// Content-Type as the row states.
func ModelsSpec(input func() framework.Input[ModelsRow]) {
	framework.CheckInput("ModelsSpec", input)
	var in framework.Input[ModelsRow]
	BeforeEach(func() {
		in = input()
		in.Begin()
	})

	It("lists the served model through the router Service, as an OpenAI client asks", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		base, err := dep.OpenAIBaseURL(ctx)
		Expect(err).NotTo(HaveOccurred())
		n := in.Expect.Requests
		By(fmt.Sprintf("listing the models %d times through %s, a new connection each", n, base))
		rep, err := in.RunTraffic(ctx, traffic.Plan{BaseURL: base, Endpoint: traffic.EndpointModels, Requests: n,
			NewConnectionPerRequest: true, RequestTimeout: in.Config.Traffic.RequestTimeout.D(), CaptureHeaders: []string{"Content-Type"}})
		Expect(rep).NotTo(BeNil(), "listing the models: %v", err)
		answers := modelAnswers(rep.Results)
		seen := map[string]int{}
		for _, a := range answers {
			seen[fmt.Sprintf("%d %s", a.Status, fieldWords(a.Fields))]++
		}
		var measured []string
		for _, k := range slices.Sorted(maps.Keys(seen)) {
			measured = append(measured, fmt.Sprintf("%d× %s", seen[k], k))
		}
		in.Record(in.Row.Summary, strings.Join(measured, "; "))
		Expect(err).NotTo(HaveOccurred())
		Expect(answers).To(assertions.HaveAllAnswered(http.StatusOK, map[string]string{
			"data[].id": in.Config.Model.Name, "data[].owned_by": in.Expect.OwnedBy, "content-type": in.Expect.ContentType,
		}), "GET /v1/models through the router Service")
	})
}

// modelAnswers are the model lists the traffic driver read, as the
// answers the claim judges: the listed ids, their owners (each once, in
// order) and the Content-Type; a request that failed carries its class
// and error instead.
func modelAnswers(results []traffic.Result) []assertions.Answer {
	var out []assertions.Answer
	for _, r := range results {
		a := assertions.Answer{Request: fmt.Sprintf("GET /v1/models #%d", r.Index+1), Status: r.Status, Fields: map[string]string{}}
		if r.Class != traffic.ClassOK {
			a.Fields["error"] = fmt.Sprintf("%s: %s", r.Class, r.Error)
			out = append(out, a)
			continue
		}
		var ids, owners []string
		for _, m := range r.Models {
			ids = append(ids, m.ID)
			owners = append(owners, m.OwnedBy)
		}
		a.Fields["data[].id"] = strings.Join(ids, ",")
		a.Fields["data[].owned_by"] = strings.Join(slices.Compact(owners), ",")
		a.Fields["content-type"] = r.ResponseHeaders["content-type"]
		out = append(out, a)
	}
	return out
}

// fieldWords is an answer's fields as key=value, in key order.
func fieldWords(fields map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, fields[k]))
	}
	return strings.Join(parts, " ")
}
