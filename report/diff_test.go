package report

import (
	"strings"
	"testing"
)

func split(claim, pair, title string, requests int, counts ...float64) SplitResult {
	s := Split{Claim: claim, Pair: pair, Title: title, Requests: requests}
	for i, c := range counts {
		s.Replicas = append(s.Replicas, ReplicaCount{Replica: string(rune('a' + i)), Count: c})
	}
	return SplitResult{Split: s}
}

func twoRuns() (base, cur *Report) {
	base = &Report{
		Headline: "Routing conformance on the simulator: 3 passed",
		Claims:   []ClaimTable{{Name: "affinity", Rows: []ClaimRow{{Pair: "p1", Result: ResultPass}, {Pair: "p2", Result: ResultSkip}}}},
		Specs:    []SpecResult{{Name: "spec a", Result: ResultPass}, {Name: "spec gone", Result: ResultPass}},
		Splits: []SplitResult{
			split("affinity", "p1", "serial", 120, 120, 0),
			split("roundrobin", "p1", "rr", 120, 60, 60),
			split("roundrobin", "p2", "rr", 120, 60, 60),
			split("affinity", "p2", "gone", 120, 60, 60),
			split("roundrobin", "p3", "120 serial chats", 120, 60, 60),
		},
		Series: []SeriesSeen{{Claim: "metrics", Pair: "p1", Key: "old_total{worker}"}, {Claim: "metrics", Pair: "p1", Key: "kept_total"}},
	}
	cur = &Report{
		Claims: []ClaimTable{{Name: "affinity", Rows: []ClaimRow{{Pair: "p1", Result: ResultFail}, {Pair: "p2", Result: ResultSkip}}}},
		Specs:  []SpecResult{{Name: "spec a", Result: ResultFail}, {Name: "spec new", Result: ResultPass}},
		Splits: []SplitResult{
			split("affinity", "p1", "serial", 120, 0, 120),               // the other replica, same shape: not a move
			split("roundrobin", "p1", "rr", 120, 64, 56),                 // 3.3 points: within the tolerance
			split("roundrobin", "p2", "rr", 120, 80, 40),                 // 16.7 points: moved
			split("metrics", "p2", "appeared", 120, 1, 119),              // new
			split("roundrobin", "p3", "240 serial chats", 240, 120, 120), // retitled, same shares
		},
		Series: []SeriesSeen{{Claim: "metrics", Pair: "p1", Key: "kept_total"}, {Claim: "metrics", Pair: "p1", Key: "new_total{worker}"}},
	}
	return base, cur
}

func TestCompareListsWhatChangedBeyondTheTolerance(t *testing.T) {
	base, cur := twoRuns()
	d := Compare(base, cur, "qualification-v0.8.0.tar.gz")
	if d.Tolerance != 0.05 || d.BaselineHeadline != base.Headline {
		t.Errorf("diff header %+v", d)
	}
	if len(d.Claims) != 1 || d.Claims[0] != (ResultChange{Name: "affinity / p1", Before: ResultPass, After: ResultFail}) {
		t.Errorf("claims %+v", d.Claims)
	}
	want := []ResultChange{{"spec a", ResultPass, ResultFail}, {"spec gone", ResultPass, Absent}, {"spec new", Absent, ResultPass}}
	if len(d.Specs) != 3 || d.Specs[0] != want[0] || d.Specs[1] != want[1] || d.Specs[2] != want[2] {
		t.Errorf("specs %+v", d.Specs)
	}
	var moved []string
	for _, s := range d.Splits {
		moved = append(moved, s.Claim+"/"+s.Pair+"/"+s.Title+" "+s.Before+" → "+s.After)
	}
	if strings.Join(moved, "; ") != "affinity/p2/gone 60/60 → absent; metrics/p2/appeared absent → 1/119; roundrobin/p2/rr 60/60 → 80/40" {
		t.Errorf("splits %v", moved)
	}
	if len(d.SeriesAppeared) != 1 || d.SeriesAppeared[0].Key != "new_total{worker}" || len(d.SeriesVanished) != 1 || d.SeriesVanished[0].Key != "old_total{worker}" {
		t.Errorf("series +%v -%v", d.SeriesAppeared, d.SeriesVanished)
	}
	if same := Compare(base, base, "x"); !same.Empty() {
		t.Errorf("a run compared with itself: %+v", same)
	}
}

func TestTheDiffIsRenderedWithItsTolerance(t *testing.T) {
	base, cur := twoRuns()
	cur.Baseline = Compare(base, cur, "qualification-v0.8.0.tar.gz")
	md := Markdown(cur)
	for _, want := range []string{
		"## Changes since the baseline",
		"Baseline: qualification-v0.8.0.tar.gz — Routing conformance on the simulator: 3 passed",
		"more than 5 percentage points",
		"**Claims whose result changed**",
		"- affinity / p1: PASS → FAIL",
		"- roundrobin / p2, rr: 60/60 → 80/40 (largest share change 17 points)",
		"**Splits measured only in this run**\n\n- metrics / p2, appeared: 1/119",
		"**Splits measured only in the baseline**\n\n- affinity / p2, gone: 60/60",
		"**Metric series that appeared**\n\n- metrics / p1: new_total{worker}",
		"**Metric series that vanished**\n\n- metrics / p1: old_total{worker}",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	page, err := HTML(cur)
	if err != nil || !strings.Contains(page, "more than 5 percentage points") || !strings.Contains(page, "<th>Splits that moved by more than 5 percentage points</th>") {
		t.Errorf("html diff: %v", err)
	}
	cur.Baseline = Compare(base, base, "same")
	if md := Markdown(cur); !strings.Contains(md, "No change.") {
		t.Error("an empty diff does not say so")
	}
}
