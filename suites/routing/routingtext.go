package routing

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimRoutingText: what text each argv router's cache_aware matches on.
const ClaimRoutingText = "routingtext"

var _ = register(Claim{
	Name:        ClaimRoutingText,
	Title:       "Routing text",
	Labels:      []string{LabelNeedsGPU},
	PolicyLabel: true,
	Require: func(e fixtures.Expectation) []string {
		return need(nil, len(e.RoutingText) > 0 && e.InFlight != nil && e.InFlight.WorkerLabel != "",
			"routingtext needs routingText cases and the inFlight gauge with its workerLabel")
	},
	// The default deployment: every case's keys are fresh (a new nonce or
	// random session ids), its splits are deltas over its own requests, and
	// it starts only once the router shows nothing in flight.
	Deployment: documentedArgs,
	Spec: func(p api.Pair, input func() Input) {
		describeCases(ClaimRoutingText, p, "any case", routingCases, func(name string) {
			RoutingTextSpec(func() RoutingTextSpecInput { return RoutingTextSpecInput{Input: input(), Case: name} })
		})
	},
})

// RoutingTextSpecInput is the input of RoutingTextSpec.
type RoutingTextSpecInput struct {
	Input
	// Case names the routingText case of the pair's row ("" for a pair the
	// claim does not apply to: the spec skips with the reason).
	Case string
	// Requests is the number of serial requests per key (default 20).
	Requests int
}

// RoutingTextSpec runs one routing-text case. With two keys A and B: A's
// first request is held in flight (the router's in-flight gauge confirms
// its pick), B's first is sent meanwhile and lands as the case says (the
// other replica by least load, or A's by a text match), then serial
// requests of A and of B: kept, each on its own first replica; or
// one-replica, all on A's. Unrelated serial chats: all on one replica.
// Every split is an engine counter delta over the requests it names.
func RoutingTextSpec(input func() RoutingTextSpecInput) {
	var (
		in  RoutingTextSpecInput
		exp fixtures.Expectation
		rc  fixtures.RoutingCase
	)
	BeforeEach(func() {
		in = input()
		exp = in.begin("RoutingTextSpec", ClaimRoutingText)
		rc = findCase(exp.RoutingText, func(c fixtures.RoutingCase) string { return c.Name }, in.Case, "routingText case", in.Pair)
		if in.Requests == 0 {
			in.Requests = 20
		}
	})

	It("routes each key as its routing text implies", func(ctx SpecContext) {
		dep := in.ready(ctx, ClaimRoutingText, exp.RouterArgs)
		rs := in.replicas(ctx, dep)
		base := in.plan(ctx, dep, in.Requests)
		if rc.Endpoint == fixtures.EndpointCompletions {
			base.Endpoint = traffic.EndpointCompletions
		}
		base.Prompts.Nonce = newHex()
		serial := func(plan traffic.Plan, what string) split.Split {
			before := scrapeEngines(ctx, dep, rs)
			in.send(ctx, ClaimRoutingText, plan)
			s := in.measureSplit(ctx, ClaimRoutingText, dep, in.Pair, rs, before, plan.Requests)
			title := fmt.Sprintf("%s: %d serial %s", rc.Name, plan.Requests, what)
			report.Record(splitEntry(ClaimRoutingText, in.Pair, title, s, rs, plan.Requests, 0, rc.Expect))
			return s
		}

		if rc.Keys == fixtures.KeysUnrelated {
			base.Prompts = traffic.PromptSet{Kind: traffic.PromptsUnrelated, PrefixChars: in.Config.Traffic.PrefixChars}
			s := serial(base, "unrelated chats")
			report.Record(report.Claim{Claim: ClaimRoutingText, Pair: in.Pair.String(), Expected: rc.Name + ": all on one replica",
				Measured: rc.Name + ": " + s.Ratio()})
			Expect(s).To(assertions.BeAllOnOneReplica(), rc.Why)
			return
		}

		a, b := keyPlans(base, rc.Keys)
		h := in.startHolds(ctx, ClaimRoutingText, dep, rs, *exp.InFlight)
		x := h.hold(ctx, a)
		first := b
		first.Requests = 1
		bFirst := serial(first, "request: key B's first, while key A's first is held on "+x)
		h.release()

		a.FirstIndex, b.FirstIndex = 1, 1
		sa := serial(a, "requests of key A")
		sb := serial(b, "requests of key B")
		y := ""
		if served := bFirst.Served(); len(served) == 1 {
			y = served[0]
		}
		report.Record(report.Claim{Claim: ClaimRoutingText, Pair: in.Pair.String(),
			Expected: fmt.Sprintf("%s: B's first on the %s replica; serial %s", rc.Name, rc.Busy, rc.Expect),
			Measured: fmt.Sprintf("%s: A's first held on %s, B's first on %s; serial A %s, serial B %s", rc.Name, x, y, sa.Ratio(), sb.Ratio())})

		if rc.Busy == fixtures.BusySame {
			Expect(bFirst).To(assertions.BeAllOn(x), "B's first request while A's is held on %s: %s", x, rc.Why)
		} else {
			Expect(bFirst).To(assertions.BeAllOnOneReplica(), "B's first request")
			Expect(bFirst.Count(x)).To(BeZero(), "B's first request went to %s, which holds A's first; least load picks another: %s", x, rc.Why)
		}
		Expect(sa).To(assertions.BeAllOn(x), "serial requests of key A, whose first went to %s: %s", x, rc.Why)
		if rc.Expect == fixtures.ExpectKept {
			Expect(sb).To(assertions.BeAllOn(y), "serial requests of key B, whose first went to %s: %s", y, rc.Why)
		} else {
			Expect(sb).To(assertions.BeAllOn(x), "serial requests of key B land where key A's do: %s", rc.Why)
		}
	})
}

// keyPlans are the plans of keys A and B: prefixes differ in their
// prompts (two nonces, so two prefixes that differ from the first
// character); sessions and blank sessions share the prompts and differ
// only in session_params.session_id (random ids with different first
// characters, or two ids that trim() leaves empty).
func keyPlans(base traffic.Plan, keys string) (a, b traffic.Plan) {
	a, b = base, base
	switch keys {
	case fixtures.KeysPrefixes:
		b.Prompts.Nonce = newHex()
		for b.Prompts.Nonce[0] == a.Prompts.Nonce[0] {
			b.Prompts.Nonce = newHex()
		}
	case fixtures.KeysSessions:
		ida, idb := newHex(), newHex()
		for idb[0] == ida[0] {
			idb = newHex()
		}
		a.SessionParams = map[string]string{"session_id": ida}
		b.SessionParams = map[string]string{"session_id": idb}
	case fixtures.KeysBlankSessions:
		a.SessionParams = map[string]string{"session_id": " "}
		b.SessionParams = map[string]string{"session_id": "\t \t"}
	}
	return a, b
}

// newHex is 16 random hex characters.
func newHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails on Linux
	return hex.EncodeToString(b[:])
}

// routingCases names the routingText cases of a row.
func routingCases(e fixtures.Expectation) []string {
	var out []string
	for _, c := range e.RoutingText {
		out = append(out, c.Name)
	}
	return out
}
