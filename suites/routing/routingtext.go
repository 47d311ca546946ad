package routing

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gpustack/routing-conformance/assertions"
	"github.com/gpustack/routing-conformance/assertions/split"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/suites/framework"
	"github.com/gpustack/routing-conformance/traffic"
)

// ClaimRoutingText: what text each argv router's cache_aware matches on:
// the prompt of a completion; for a chat, vllm-router its session id (or
// nothing), sglang-gateway the messages' text.
const ClaimRoutingText = "routingtext"

// RoutingTextRow is what routingtext's rows state.
type RoutingTextRow struct {
	// InFlight is the router's per-worker in-flight gauge that confirms
	// each held request's dispatch.
	InFlight framework.InFlightGauge `json:"inFlight"`
	// RoutingText lists the cases.
	RoutingText []RoutingCase `json:"routingText"`
}

// Check implements yamlbind.Checker.
func (r RoutingTextRow) Check() []string {
	return uniqueNames("routingText", r.RoutingText, func(c RoutingCase) string { return c.Name })
}

// Routing-text case vocabulary (RoutingCase).
const (
	EndpointChat        = "chat"
	EndpointCompletions = "completions"

	// KeysPrefixes: two long prompts that differ from their first
	// character; KeysSessions: chats with two session_params.session_id
	// values that differ from their first character; KeysBlankSessions:
	// chats whose session ids are blank or whitespace; KeysUnrelated:
	// serial chats sharing no prefix at all.
	KeysPrefixes      = "prefixes"
	KeysSessions      = "sessions"
	KeysBlankSessions = "blank-sessions"
	KeysUnrelated     = "unrelated"

	// ExpectKept: each key's serial requests stay on the replica its first
	// request took. ExpectOneReplica: every serial request lands on one
	// replica, whatever its key.
	ExpectKept       = "kept"
	ExpectOneReplica = "one-replica"

	// BusyOther: key B's first request, sent while key A's first is held
	// in flight, goes to another replica (least load); BusySame: to A's
	// (its text matched A's, and one request in flight is no imbalance).
	BusyOther = "other"
	BusySame  = "same"
)

// RoutingCase is one scenario of the routing-text claim. For two keys A
// and B (every Keys but unrelated): A's first request is held in flight,
// B's first request is sent meanwhile (and takes the other replica, least
// load), then serial requests of A, then of B. For unrelated: serial
// chats only.
type RoutingCase struct {
	// Name is unique in the row (lower-case, digits, '-').
	Name string `json:"name"`
	// Endpoint is chat or completions.
	Endpoint string `json:"endpoint"`
	// Keys is prefixes, sessions, blank-sessions or unrelated.
	Keys string `json:"keys"`
	// Busy is where key B's first request goes while key A's first is
	// held: other or same (not set for unrelated).
	Busy string `json:"busy,omitempty"`
	// Expect is kept or one-replica (of the serial requests).
	Expect string `json:"expect"`
	// Why is the algorithmic fact that implies Expect.
	Why string `json:"why"`
}

// Check implements yamlbind.Checker.
func (rc RoutingCase) Check() []string {
	var out []string
	need := func(ok bool, msg string) {
		if !ok {
			out = append(out, msg)
		}
	}
	need(rc.Endpoint == EndpointChat || rc.Endpoint == EndpointCompletions, "endpoint must be chat or completions")
	need(slices.Contains([]string{KeysPrefixes, KeysSessions, KeysBlankSessions, KeysUnrelated}, rc.Keys),
		"keys must be prefixes, sessions, blank-sessions or unrelated")
	need(rc.Keys == KeysPrefixes || rc.Endpoint == EndpointChat, "sessions and unrelated keys are chats")
	need(rc.Expect == ExpectKept || rc.Expect == ExpectOneReplica, "expect must be kept or one-replica")
	need(rc.Keys != KeysUnrelated || rc.Expect == ExpectOneReplica, "unrelated serial chats have one key, so only one-replica applies")
	need((rc.Keys == KeysUnrelated) == (rc.Busy == ""), "busy (other or same) is set for two keys, not for unrelated")
	need(rc.Busy == "" || rc.Busy == BusyOther || rc.Busy == BusySame, "busy must be other or same")
	return out
}

var _ = framework.Add(Registry, framework.Claim[RoutingTextRow]{
	Name:  ClaimRoutingText,
	Title: "Routing text",
	Asserts: "key A's first request held in flight (confirmed on the router's in-flight gauge), key B's first sent " +
		"meanwhile, then serial requests of each: completions keep one replica per prefix on both routers; vllm-router " +
		"chat follows `session_params.session_id` (blank ids route on \"\") and otherwise lands on one replica; " +
		"sglang-gateway chat keeps one replica per prefix and ignores session ids; unrelated serial chats on one replica",
	Labels:      []string{fixtures.LabelNeedsGPU},
	PolicyLabel: true,
	// The default deployment: every case's keys are fresh (a new nonce or
	// random session ids), its splits are deltas over its own requests, and
	// it starts only once the router shows nothing in flight.
	Cases: func(row fixtures.Row, r RoutingTextRow) []framework.Case {
		var out []framework.Case
		for _, rc := range r.RoutingText {
			out = append(out, framework.Case{Name: rc.Name, Deployment: framework.Shared(row.RouterArgs)})
		}
		return out
	},
	Specs: func(input func() framework.Input[RoutingTextRow]) {
		RoutingTextSpec(func() RoutingTextSpecInput {
			in := input()
			return RoutingTextSpecInput{Input: in, Routing: caseOf(in.Case.Name, in.Expect.RoutingText, func(c RoutingCase) string { return c.Name })}
		})
	},
})

// RoutingTextSpecInput is the input of RoutingTextSpec.
type RoutingTextSpecInput struct {
	framework.Input[RoutingTextRow]
	// Requests is the number of serial requests per key (default 20).
	Requests int
	// Routing is the row's case the spec runs.
	Routing *RoutingCase
}

// Check implements framework.SpecInput.
func (in RoutingTextSpecInput) Check() error {
	if err := checkRequests(in.Spec, in.Requests); err != nil {
		return err
	}
	return checkCase(in.Spec, "Routing", "routingText", in.Routing)
}

// RoutingTextSpec runs one routing-text case. With two keys A and B: A's
// first request is held in flight (the router's in-flight gauge confirms
// its pick), B's first is sent meanwhile and lands as the case says (the
// other replica by least load, or A's by a text match), then serial
// requests of A and of B: kept, each on its own first replica; or
// one-replica, all on A's. Unrelated serial chats: all on one replica.
// Every split is an engine counter delta over the requests it names.
func RoutingTextSpec(input func() RoutingTextSpecInput) {
	framework.CheckInput("RoutingTextSpec", input)
	var (
		in RoutingTextSpecInput
		rc RoutingCase
	)
	BeforeEach(func() {
		in = input()
		in.Begin()
		rc = *in.Routing
		if in.Requests == 0 {
			in.Requests = 20
		}
	})

	It("routes each key as its routing text implies", func(ctx SpecContext) {
		dep := in.Ready(ctx)
		rs := in.Replicas(ctx, dep)
		base := in.ChatPlan(ctx, dep, in.Requests)
		if rc.Endpoint == EndpointCompletions {
			base.Endpoint = traffic.EndpointCompletions
		}
		base.Prompts.Nonce = newHex()
		serial := func(plan traffic.Plan, what string) split.Split {
			before := framework.ScrapeEngines(ctx, dep, rs)
			in.Send(ctx, plan)
			s := in.MeasureSplit(ctx, dep, rs, before, plan.Requests)
			in.RecordSplit(fmt.Sprintf("%s: %d serial %s", rc.Name, plan.Requests, what), s, rs, plan.Requests, 0, rc.Expect)
			return s
		}

		if rc.Keys == KeysUnrelated {
			base.Prompts = traffic.PromptSet{Kind: traffic.PromptsUnrelated, PrefixChars: in.Config.Traffic.PrefixChars}
			s := serial(base, "unrelated chats")
			in.Record(rc.Name+": all on one replica", rc.Name+": "+s.Ratio())
			Expect(s).To(assertions.BeAllOnOneReplica(), rc.Why)
			return
		}

		a, b := keyPlans(base, rc.Keys)
		h := in.StartHolds(ctx, dep, rs, in.Expect.InFlight)
		x := h.Hold(ctx, a)
		first := b
		first.Requests = 1
		bFirst := serial(first, "request: key B's first, while key A's first is held on "+x)
		h.Release()

		a.FirstIndex, b.FirstIndex = 1, 1
		sa := serial(a, "requests of key A")
		sb := serial(b, "requests of key B")
		y := ""
		if served := bFirst.Served(); len(served) == 1 {
			y = served[0]
		}
		in.Record(fmt.Sprintf("%s: B's first on the %s replica; serial %s", rc.Name, rc.Busy, rc.Expect),
			fmt.Sprintf("%s: A's first held on %s, B's first on %s; serial A %s, serial B %s", rc.Name, x, y, sa.Ratio(), sb.Ratio()))

		if rc.Busy == BusySame {
			Expect(bFirst).To(assertions.BeAllOn(x), "B's first request while A's is held on %s: %s", x, rc.Why)
		} else {
			Expect(bFirst).To(assertions.BeAllOnOneReplica(), "B's first request")
			Expect(bFirst).NotTo(assertions.UseReplica(x), "B's first request, sent while %s holds A's first; least load picks another: %s", x, rc.Why)
		}
		Expect(sa).To(assertions.BeAllOn(x), "serial requests of key A, whose first went to %s: %s", x, rc.Why)
		if rc.Expect == ExpectKept {
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
	case KeysPrefixes:
		b.Prompts.Nonce = newHex()
		for b.Prompts.Nonce[0] == a.Prompts.Nonce[0] {
			b.Prompts.Nonce = newHex()
		}
	case KeysSessions:
		ida, idb := newHex(), newHex()
		for idb[0] == ida[0] {
			idb = newHex()
		}
		a.SessionParams = map[string]string{"session_id": ida}
		b.SessionParams = map[string]string{"session_id": idb}
	case KeysBlankSessions:
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

// caseOf is the entry of cases that the case named name runs, nil when
// there is none (the spec input's Check then names the field).
func caseOf[T any](name string, cases []T, nameOf func(T) string) *T {
	i := slices.IndexFunc(cases, func(c T) bool { return nameOf(c) == name })
	if i < 0 {
		return nil
	}
	return &cases[i]
}

// checkCase is the Check of a spec input that runs one of its row's
// cases: the common part's, then entry, the row's entry for the case
// (named field in the input, list in the row), which an applicable row
// must hold.
func checkCase[T any](in framework.Spec, field, list string, entry *T) error {
	if err := in.Check(); err != nil {
		return err
	}
	if entry == nil && in.Row.NotApplicable == "" {
		return fmt.Errorf("input.%s is nil: case %q is not one of the row's %s in %s", field, in.Case.Name, list, fixtures.ExpectPath)
	}
	return nil
}

// checkRequests is the Check of a spec input with a Requests knob (0: its
// default): the common part's, then the knob's.
func checkRequests(in framework.Spec, requests int) error {
	if err := in.Check(); err != nil {
		return err
	}
	if requests < 0 {
		return fmt.Errorf("input.Requests must be at least 0 (0: the default; got %d)", requests)
	}
	return nil
}

// uniqueNames checks the names of a row's cases: unique, lower-case
// letters, digits and '-'.
func uniqueNames[T any](field string, cases []T, nameOf func(T) string) []string {
	var out, names []string
	for i, c := range cases {
		n := nameOf(c)
		if !caseName.MatchString(n) || slices.Contains(names, n) {
			out = append(out, fmt.Sprintf("%s[%d] (%s): name must be unique, lower-case letters, digits and '-'", field, i, n))
		}
		names = append(names, n)
	}
	return out
}

var caseName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
