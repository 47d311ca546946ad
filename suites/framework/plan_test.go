package framework

import (
	"slices"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/fixtures"
)

// rows writes a claims entry with a row per documented pair: the row of
// vllm-router+vLLM is first, the others say the claim does not apply.
func rows(name, kind, first string) string {
	s := "  - name: " + name + "\n    title: " + name + "\n    source: docs/routers.md#routing\n"
	if kind != "" {
		s += "    kind: " + kind + "\n"
	}
	s += "    pairs:\n      - pair: vllm-router+vLLM\n        summary: s\n" + first
	for _, p := range fixtures.DocumentedPairs[1:] {
		s += "      - {pair: " + p.String() + ", summary: n/a, notApplicable: not here}\n"
	}
	return s
}

func testFile(t *testing.T, entries ...string) *fixtures.ExpectFile {
	t.Helper()
	f, err := fixtures.ParseExpectations([]byte("claims:\n" + strings.Join(entries, "")))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

type splitRow struct {
	Split fixtures.Split `json:"split"`
}

type emptyRow struct{}

func specs[R any](func() Input[R]) {}

var vr = fixtures.VLLMRouterVLLM

func TestRowsBindStrictlyIntoTheClaimsType(t *testing.T) {
	f := testFile(t,
		rows("a", "", "        split: {shape: one-replica, documented: \"1/0\"}\n"),
		rows("b", "", "        split: {shape: one-replica, documented: \"1/0\", shap: x}\n"),
		rows("c", "", "        routerArgs: [--policy, random]\n"))
	r := &Registry{Expect: f}
	Add(r, Claim[splitRow]{Name: "a", Specs: specs[splitRow]})
	Add(r, Claim[splitRow]{Name: "b", Specs: specs[splitRow]})
	Add(r, Claim[splitRow]{Name: "c", Specs: specs[splitRow]})
	Add(r, Claim[emptyRow]{Name: "d", Specs: specs[emptyRow]})
	Add(r, Claim[emptyRow]{Name: "a", Specs: specs[emptyRow]})
	err := r.Check()
	for _, want := range []string{
		"fixtures/expect.yaml: claims[1] (b).pairs[0] (vllm-router+vLLM).split.shap is not a known field; known fields here: confidence, documented, shape (line 18)",
		"fixtures/expect.yaml: claims[2] (c).pairs[0] (vllm-router+vLLM).split must be set (line 26)",
		`fixtures/expect.yaml: no claims entry named "d" for the registered claim`,
		`claim "a" is registered twice`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
	var got splitRow
	for _, c := range r.claims {
		if cl, ok := c.(*claim[splitRow]); ok && cl.Name == "a" {
			got = cl.rows[vr].exp
		}
	}
	if got.Split.Documented != "1/0" {
		t.Errorf("a's row for %s: %+v", vr, got)
	}

	r = &Registry{Expect: f}
	Add(r, Claim[splitRow]{Name: "a", Specs: specs[splitRow]})
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "claims[1] (b) has no registered claim; add b.go") {
		t.Errorf("an entry without its claim: err = %v", err)
	}
}

// planned is the shape of one pair's plan: each shared deployment by its
// name, with its steps in order ("claim/case" and "edit" or "in-and-back"
// where the framework edits), and the claims that run alone.
func planned(pp PairPlan) (shared map[string][]string, alone []string) {
	shared = map[string][]string{}
	for _, s := range pp.Shared {
		for _, st := range s.Steps() {
			w := st.Claim.Name + "/" + st.Case.Name
			switch {
			case st.Edit:
				w += " edit"
			case st.EditBack:
				w += " in-and-back"
			}
			shared[s.Name] = append(shared[s.Name], w)
		}
	}
	for _, u := range pp.Alone {
		alone = append(alone, u.Claim.Name+"/"+u.Case.Name)
	}
	return shared, alone
}

func TestThePlanSharesOneDeploymentPerShapeAndEditsTheArgs(t *testing.T) {
	rr := "        routerArgs: [--policy, round_robin]\n"
	f := testFile(t,
		rows("fault", "", ""),
		rows("defaults", "", ""),
		rows("rr", "", rr),
		rows("pd", "", rr),
		rows("cases", "", ""),
		rows("alsorr", "", rr),
		rows("bad", "", ""))
	r := &Registry{Expect: f}
	Add(r, Claim[emptyRow]{Name: "fault", Mutates: true, Specs: specs[emptyRow],
		Cases: func(row fixtures.Row, _ emptyRow) []Case {
			return []Case{{Deployment: Shared(row.RouterArgs), ExtraEnginePods: 1}}
		}})
	Add(r, Claim[emptyRow]{Name: "defaults", Specs: specs[emptyRow]})
	Add(r, Claim[emptyRow]{Name: "rr", Specs: specs[emptyRow]})
	Add(r, Claim[emptyRow]{Name: "pd", PD: true, Specs: specs[emptyRow], Cases: func(row fixtures.Row, _ emptyRow) []Case {
		return []Case{{Deployment: &Deployment{RouterArgs: row.RouterArgs, Prefill: 2, Decode: 2}}}
	}})
	Add(r, Claim[emptyRow]{Name: "cases", Specs: specs[emptyRow], Cases: func(row fixtures.Row, _ emptyRow) []Case {
		return []Case{
			{Name: "shared", Deployment: Shared(row.RouterArgs)},
			{Name: "x", Deployment: Shared([]string{"--x", "1"})},
			{Name: "own", Deployment: &Deployment{RouterArgs: []string{"--x", "1"}, Replicas: 1, Own: true}},
			{Name: "none"},
		}
	}})
	Add(r, Claim[emptyRow]{Name: "alsorr", Specs: specs[emptyRow]})
	Add(r, Claim[emptyRow]{Name: "bad", Specs: specs[emptyRow], Cases: func(fixtures.Row, emptyRow) []Case {
		return []Case{
			{Name: "server", Deployment: &Deployment{RouterArgs: []string{"--policy", "roundrobin"}, Refused: true}},
			{Name: "pd", Deployment: &Deployment{RouterArgs: []string{"--prefill-policy", "x"}, Prefill: 2, Decode: 2, Refused: true}},
		}
	}})
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}

	pp := r.Plan([]api.Pair{vr}, false).Pairs[0]
	shared, alone := planned(pp)
	for name, want := range map[string][]string{
		// One server deployment whatever the args: the uses with the same
		// args side by side (rr beside alsorr), each change of args an
		// edit, the refused value edited in and back, the mutating claim
		// last, back on the defaults.
		"shared-vllm-router-vllm": {"defaults/", "cases/shared", "rr/ edit", "alsorr/", "cases/x edit", "bad/server in-and-back", "fault/ edit"},
		// A prefill/decode pair is a deployment of its own shape, never the
		// server one; created with pd's args, it needs no edit for them.
		"pd2x2-vllm-router-vllm": {"pd/", "bad/pd in-and-back"},
	} {
		if !slices.Equal(shared[name], want) {
			t.Errorf("deployment %s: %v, want %v (all: %v)", name, shared[name], want, shared)
		}
	}
	if len(shared) != 2 {
		t.Errorf("shared deployments %v, want the server one and the 2+2 pair", shared)
	}
	if !slices.Equal(alone, []string{"cases/own", "cases/none"}) {
		t.Errorf("alone %v", alone)
	}
	if u := pp.Alone[0]; u.Own == nil || u.Own.Name != "cases-own-vllm-router-vllm" || !u.Own.Own {
		t.Errorf("the own case's deployment %+v", u.Own)
	}
	if pd := pp.Shared[1]; !slices.Equal(pd.RouterArgs, []string{"--policy", "round_robin"}) || pd.Edits() != 2 {
		t.Errorf("the pd deployment is created with %q and edited %d times, want --policy round_robin and 2 (in and back)", pd.RouterArgs, pd.Edits())
	}
	// The other pairs' rows do not apply: one case each, no deployment.
	if other := r.Plan([]api.Pair{fixtures.LLMDRouterVLLM}, false).Pairs[0]; len(other.Shared) != 0 || len(other.Alone) != 7 {
		t.Errorf("a pair no claim applies to: %+v", other)
	}

	// 2 (server, + 1 replacement) + 4 (pd) + 1 (own, one replica); edits:
	// rr, x, bad in and back, back to the defaults; pd's bad in and back.
	if c := r.Plan([]api.Pair{vr}, false).Cost(2); c != (Cost{ModelDeployments: 3, EnginePods: 3 + 4 + 1, RouterEdits: 5 + 2}) {
		t.Errorf("cost %+v", c)
	}
	if c := r.Plan([]api.Pair{vr}, false).Only(func(u Use) bool { return !u.Claim.Mutates }).Cost(2); c != (Cost{ModelDeployments: 3, EnginePods: 2 + 4 + 1, RouterEdits: 4 + 2}) {
		t.Errorf("cost without the fault %+v", c)
	}
	// A label filter selects on a use's labels, the pair's included; a
	// deployment whose first use is refused is created with the router's
	// defaults, then the refused value is edited in and back.
	filter, err := types.ParseLabelFilter("router:vllm-router && feature:bad")
	if err != nil {
		t.Fatal(err)
	}
	cut := r.Plan(nil, false).Only(func(u Use) bool { return filter(u.Labels) })
	if c := cut.Cost(2); c != (Cost{ModelDeployments: 2, EnginePods: 2 + 4, RouterEdits: 4}) {
		t.Errorf("cost of router:vllm-router && feature:bad %+v", c)
	}
	for _, s := range cut.Pairs[0].Shared {
		if len(s.RouterArgs) != 0 {
			t.Errorf("%s, used by a refused value alone, is created with %q, want the router's defaults", s.Name, s.RouterArgs)
		}
	}
	iso := r.Plan([]api.Pair{vr}, true).Pairs[0]
	if len(iso.Shared) != 0 || len(iso.Deployments()) != 10 {
		t.Errorf("E2E_ISOLATE: %d shared, %d deployments", len(iso.Shared), len(iso.Deployments()))
	}
	for _, u := range iso.Alone {
		if u.Claim.Name == "bad" && (u.Own == nil || !slices.Equal(u.Own.RouterArgs, u.Case.Deployment.RouterArgs)) {
			t.Errorf("E2E_ISOLATE: the refused value %s is created with its args: %+v", u.Case.Name, u.Own)
		}
	}
}

func TestObjectNamesAreDNSLabelsThatStayApart(t *testing.T) {
	a := ObjectName("thresholds-balance-abs-and-rel", vr)
	b := ObjectName("thresholds-balance-abs-and-rel-3", vr)
	if len(a) > 40 || len(b) > 40 || a == b || !strings.HasPrefix(a, "thresholds-balance-abs") {
		t.Errorf("long names %q, %q", a, b)
	}
	if got := ObjectName("--policy round_robin", vr); got != "policy-round-robin-vllm-router-vllm" {
		t.Errorf("short name %q", got)
	}
}
