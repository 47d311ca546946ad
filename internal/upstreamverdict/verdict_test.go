package upstreamverdict

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
	"github.com/gpustack/routing-conformance/fixtures"
)

// report builds a report of rows "claim pair result" and specs.
func report(rows []string, specs ...Spec) *Report {
	r := &Report{Specs: specs}
	for _, row := range rows {
		f := strings.Fields(row)
		i := slices.IndexFunc(r.Claims, func(c Claim) bool { return c.Name == f[0] })
		if i < 0 {
			r.Claims = append(r.Claims, Claim{Name: f[0]})
			i = len(r.Claims) - 1
		}
		r.Claims[i].Rows = append(r.Claims[i].Rows, struct {
			Pair   string `json:"pair"`
			Result string `json:"result"`
		}{Pair: f[1], Result: f[2]})
	}
	return r
}

// artifacts writes a failed spec's router log and Pod description as the
// sim's artifact collection does, and returns the entry naming the dir.
func artifacts(t *testing.T, log string, exit int) string {
	t.Helper()
	dir := t.TempDir()
	pod := "md-router-5f5c964765-k682f"
	for path, body := range map[string]string{
		filepath.Join("logs", pod, "router.previous.log"): log + "\n",
		filepath.Join("logs", pod, "router.log"):          "usage: launch_router.py [-h]\n",
		filepath.Join("pods", pod+".txt"): fmt.Sprintf("Containers:\n  router:\n    State:          Running\n"+
			"    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    %d\n      Started:      x\n", exit),
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("artifacts: %q", dir)
}

var testKnown = []Difference{{Claim: "badpolicy", Pair: api.Pair{Router: api.RouterVLLM, Engine: api.EngineVLLM}, Kind: FrontEnd,
	Emulated: Pass, Upstream: Fail, Shows: []Evidence{invalidChoice("--policy", "roundrobin", vllmChoices)}}}

const argparseRoundrobin = "launch_router.py: error: argument --policy: invalid choice: 'roundrobin' " +
	"(choose from 'random', 'round_robin', 'cache_aware', 'power_of_two', 'consistent_hash')"

func badpolicySpec(t *testing.T, log string, exit int) Spec {
	return Spec{Claim: "badpolicy", Pair: "vllm-router+vLLM", Text: "Bad policy --policy roundrobin stops the router",
		Result: Fail, Entries: []string{artifacts(t, log, exit)}}
}

func TestCompare(t *testing.T) {
	emulated := []string{"affinity vllm-router+vLLM PASS", "affinity sglang-gateway+SGLang PASS", "badpolicy vllm-router+vLLM PASS"}
	for _, tc := range []struct {
		name     string
		upstream *Report
		// agree, known and the mismatch lines wanted (substrings).
		agree, known int
		mismatch     []string
	}{
		{"agree, and a known row showing argparse's error and exit 2",
			report([]string{"affinity vllm-router+vLLM PASS", "affinity sglang-gateway+SGLang PASS", "badpolicy vllm-router+vLLM FAIL"},
				badpolicySpec(t, argparseRoundrobin, 2)),
			2, 1, nil},
		{"a row that differs and is not in the table names claim, pair and both outcomes",
			report([]string{"affinity vllm-router+vLLM PASS", "affinity sglang-gateway+SGLang FAIL", "badpolicy vllm-router+vLLM FAIL"},
				badpolicySpec(t, argparseRoundrobin, 2),
				Spec{Claim: "affinity", Pair: "sglang-gateway+SGLang", Result: Fail, Reason: "split 60/60, want all on one replica"}),
			1, 1, []string{"affinity / sglang-gateway+SGLang: PASS in the emulated run, FAIL upstream (split 60/60, want all on one replica)"}},
		{"a known row whose router exits otherwise",
			report([]string{"affinity vllm-router+vLLM PASS", "affinity sglang-gateway+SGLang PASS", "badpolicy vllm-router+vLLM FAIL"},
				badpolicySpec(t, argparseRoundrobin, 1)),
			2, 0, []string{"badpolicy / vllm-router+vLLM: upstream spec \"Bad policy --policy roundrobin stops the router\": router exit codes [1]"}},
		{"a known row whose log lacks the error",
			report([]string{"affinity vllm-router+vLLM PASS", "affinity sglang-gateway+SGLang PASS", "badpolicy vllm-router+vLLM FAIL"},
				badpolicySpec(t, "error: invalid value 'roundrobin' for '--policy <POLICY>'", 2)),
			2, 0, []string{"no line of the router's logs", "matches"}},
		{"a known row that does not differ (the front end changed) is a mismatch",
			report([]string{"affinity vllm-router+vLLM PASS", "affinity sglang-gateway+SGLang PASS", "badpolicy vllm-router+vLLM PASS"}),
			2, 0, []string{"badpolicy / vllm-router+vLLM: PASS in the emulated run, PASS upstream; the known-differences table says PASS and FAIL (front end)"}},
		{"a row only one run has",
			report([]string{"affinity vllm-router+vLLM PASS", "badpolicy vllm-router+vLLM FAIL"}, badpolicySpec(t, argparseRoundrobin, 2)),
			1, 1, []string{"affinity / sglang-gateway+SGLang: PASS in the emulated run, absent upstream"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Compare(report(emulated), tc.upstream, testKnown)
			if v.Agree != tc.agree || v.Known != tc.known || len(v.Mismatches) != min(len(tc.mismatch), 1) {
				t.Errorf("%s\nmismatches: %q", v.Line(), v.Mismatches)
			}
			all := strings.Join(v.Mismatches, "\n")
			for _, want := range tc.mismatch {
				if !strings.Contains(all, want) {
					t.Errorf("mismatches %q lack %q", v.Mismatches, want)
				}
			}
			if v.OK() != (len(tc.mismatch) == 0) {
				t.Errorf("OK() = %t with mismatches %q", v.OK(), v.Mismatches)
			}
			if len(v.Rows) != 3 {
				t.Errorf("%d rows compared, want 3", len(v.Rows))
			}
		})
	}
}

// Every row of the table names a claim and pair of fixtures/expect.yaml,
// says why and cites its source, and its patterns compile; the membership
// claims the sim limits are claims too.
func TestKnownTableIsWellFormed(t *testing.T) {
	exp, err := fixtures.Expectations()
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]bool{}
	for _, c := range exp.Claims {
		claims[c.Name] = true
	}
	seen := map[string]bool{}
	for _, d := range Known {
		id := d.Claim + " " + d.Pair.String()
		if seen[id] {
			t.Errorf("%s is in the table twice", id)
		}
		seen[id] = true
		entry, ok := exp.Claim(d.Claim)
		if _, hasRow := entry.Row(d.Pair); !ok || !hasRow || !claims[d.Claim] {
			t.Errorf("%s: not a claim row of fixtures/expect.yaml", id)
		}
		if !slices.Contains([]string{FrontEnd, StaticWorkers, EmulationBug}, d.Kind) || d.Why == "" || d.Cite == "" || len(d.Shows) == 0 {
			t.Errorf("%s: needs a kind, why, a citation and what upstream shows: %+v", id, d)
		}
		if !regexp.MustCompile(`[\w.-]+/[\w.-]+@[\w.-]+:\S+`).MatchString(d.Cite) {
			t.Errorf("%s: citation %q is not repo@tag:path", id, d.Cite)
		}
		for _, e := range d.Shows {
			for _, p := range []string{e.Log, e.Failure, e.Reason} {
				if _, err := regexp.Compile(p); err != nil {
					t.Errorf("%s: %v", id, err)
				}
			}
			if e.Exit == 0 && e.Log == "" && e.Failure == "" && e.Reason == "" {
				t.Errorf("%s: case %q asserts nothing", id, e.Case)
			}
		}
	}
	for _, m := range upstream.MembershipClaims {
		if !claims[m.Claim] {
			t.Errorf("upstream.MembershipClaims names %q, which fixtures/expect.yaml does not", m.Claim)
		}
	}
}
