package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func newCacheAwareFixture(t testing.TB, f Flavor, cfg Config, urls ...string) (Policy, []Worker) {
	t.Helper()
	p := mustNew(t, f, CacheAware, cfg, seeded(1))
	ws := workers(urls...)
	addAll(p, ws, "m")
	return p, ws
}

func twoWorkers(t testing.TB, f Flavor, cfg Config) (Policy, []Worker) {
	return newCacheAwareFixture(t, f, cfg, "http://10.0.0.1:8000", "http://10.0.0.2:8000")
}

var flavors = []Flavor{FlavorVR, FlavorSG}

func TestCacheAwareThresholdIsStrict(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			cfg := DefaultConfig() // threshold 0.3 (f32)
			p, ws := twoWorkers(t, f, cfg)
			// Teach w2 "abc": w1 busier, so min-load picks w2.
			fw(ws[0]).load.Store(1)
			if d := p.Select(ws, Request{Text: "abc", Model: "m"}); d.Index != 1 {
				t.Fatalf("setup: got %d", d.Index)
			}
			fw(ws[0]).load.Store(0)
			// 3 of 10 characters match: 0.3 is not > 0.3 -> least loaded, first on ties.
			if d := p.Select(ws, Request{Text: "abc1234567", Model: "m"}); d.Index != 0 {
				t.Fatalf("match rate exactly at threshold went to %d, want 0 (strict >)", d.Index)
			}
			// 3 of 9 = 0.333 > 0.3 -> the tenant that created "abc".
			if d := p.Select(ws, Request{Text: "abcxxxxxx", Model: "m"}); d.Index != 1 {
				t.Fatalf("match rate above threshold went to %d, want 1", d.Index)
			}
		})
	}
}

func TestCacheAwareImbalanceNeedsBothThresholdsStrict(t *testing.T) {
	cases := []struct {
		name       string
		l1, l2     int64
		imbalanced bool
	}{
		{"abs diff 65 > 64 and 65 > 0*1.5", 65, 0, true},
		{"abs diff exactly 64 is not imbalanced", 64, 0, false},
		{"rel exactly 1.5x is not imbalanced", 300, 200, false},
		{"both strict thresholds exceeded", 301, 200, true},
		{"rel exceeded but abs not", 60, 1, false},
	}
	for _, f := range flavors {
		for _, c := range cases {
			t.Run(f.String()+"/"+c.name, func(t *testing.T) {
				p, ws := twoWorkers(t, f, DefaultConfig())
				// w1 owns the text, so a balanced fleet routes it to w1.
				p.Select(ws, Request{Text: "shared prompt text", Model: "m"})
				fw(ws[0]).load.Store(c.l1)
				fw(ws[1]).load.Store(c.l2)
				d := p.Select(ws, Request{Text: "shared prompt text", Model: "m"})
				if d.Imbalanced != c.imbalanced {
					t.Fatalf("Imbalanced = %v, want %v", d.Imbalanced, c.imbalanced)
				}
				want := 0
				if c.imbalanced {
					want = 1 // shortest queue despite the cache match
				}
				if d.Index != want || !d.Record {
					t.Fatalf("picked %d (record %v), want %d", d.Index, d.Record, want)
				}
				if d.MaxLoad != max(c.l1, c.l2) || d.MinLoad != min(c.l1, c.l2) {
					t.Fatalf("loads reported %d/%d", d.MaxLoad, d.MinLoad)
				}
			})
		}
	}
}

func TestCacheAwareImbalanceCountsUnhealthyCandidatesLoad(t *testing.T) {
	p, ws := newCacheAwareFixture(t, FlavorVR, DefaultConfig(), "http://a:1", "http://b:1", "http://c:1")
	fw(ws[0]).healthy.Store(false)
	fw(ws[0]).load.Store(1000)
	fw(ws[2]).load.Store(0)
	fw(ws[1]).load.Store(0)
	d := p.Select(ws, Request{Text: "x"})
	if !d.Imbalanced || d.MaxLoad != 1000 || d.Index != 1 {
		t.Fatalf("decision %+v: the unhealthy worker's load counts toward max; pick is the first least-loaded healthy", d)
	}
}

func TestCacheAwareImbalancedPathStillTeachesTree(t *testing.T) {
	p, ws := twoWorkers(t, FlavorSG, DefaultConfig())
	fw(ws[0]).load.Store(100)
	if d := p.Select(ws, Request{Text: "taught while imbalanced", Model: "m"}); d.Index != 1 || !d.Imbalanced {
		t.Fatalf("setup %+v", d)
	}
	fw(ws[0]).load.Store(0)
	fw(ws[1]).load.Store(1)
	if d := p.Select(ws, Request{Text: "taught while imbalanced", Model: "m"}); d.Index != 1 || d.Imbalanced {
		t.Fatalf("text learned on the imbalanced path went to %d, want 1 by cache", d.Index)
	}
}

func TestCacheAwareTiesGoToFirstCandidate(t *testing.T) {
	for _, f := range flavors {
		p, ws := newCacheAwareFixture(t, f, DefaultConfig(), "http://a:1", "http://b:1", "http://c:1")
		for i := 0; i < 30; i++ {
			text := fmt.Sprintf("%d unrelated prompt %d", i, i*7919)
			if d := p.Select(ws, Request{Text: text, Model: "m"}); d.Index != 0 {
				t.Fatalf("%v: unrelated text %d went to %d, want first candidate", f, i, d.Index)
			}
		}
		// The candidate order decides, not the registration order.
		rev := []Worker{ws[2], ws[1], ws[0]}
		if d := p.Select(rev, Request{Text: "zzz brand new", Model: "m"}); d.Index != 0 {
			t.Fatalf("%v: reversed list picked %d, want 0", f, d.Index)
		}
	}
}

func TestCacheAwareCandidateIsFirstInserterNotLongestOwnMatch(t *testing.T) {
	p, ws := twoWorkers(t, FlavorSG, DefaultConfig())
	text := "You are a helpful assistant. Summarise the following report."
	// w2 inserts first (w1 busier), then w1 inserts the same text (w2 very busy).
	fw(ws[0]).load.Store(1)
	p.Select(ws, Request{Text: text, Model: "m"})
	fw(ws[1]).load.Store(100)
	fw(ws[0]).load.Store(0)
	if d := p.Select(ws, Request{Text: text, Model: "m"}); d.Index != 0 || !d.Imbalanced {
		t.Fatalf("setup: %+v", d)
	}
	// Both hold the whole text; w1 is the last inserter, first in the list and
	// less loaded. The candidate is still the node's creator, w2.
	fw(ws[1]).load.Store(1)
	if d := p.Select(ws, Request{Text: text, Model: "m"}); d.Index != 1 {
		t.Fatalf("picked %d, want 1 (creator of the matched node)", d.Index)
	}
	// A longer text w1 extends: the deepest node reached is w1's.
	fw(ws[1]).load.Store(100)
	p.Select(ws, Request{Text: text + " Use bullet points.", Model: "m"}) // imbalanced -> w1
	fw(ws[1]).load.Store(0)
	if d := p.Select(ws, Request{Text: text + " Use bullet points please", Model: "m"}); d.Index != 0 {
		t.Fatalf("picked %d, want 0 (creator of the deeper node)", d.Index)
	}
}

func TestCacheAwareEmptyTextGoesToLeastLoaded(t *testing.T) {
	for _, f := range flavors {
		p, ws := newCacheAwareFixture(t, f, DefaultConfig(), "http://a:1", "http://b:1", "http://c:1")
		// VR chat without session_id routes on "": serial traffic, all on one.
		for i := 0; i < 50; i++ {
			if d := p.Select(ws, Request{Text: "", Model: "m"}); d.Index != 0 {
				t.Fatalf("%v: serial empty text went to %d", f, d.Index)
			}
		}
		fw(ws[0]).load.Store(2)
		fw(ws[1]).load.Store(1)
		fw(ws[2]).load.Store(1)
		if d := p.Select(ws, Request{Text: "", Model: "m"}); d.Index != 1 {
			t.Fatalf("%v: empty text under load went to %d, want 1 (least loaded, first on ties)", f, d.Index)
		}
	}
}

func TestCacheAwarePicksLeastLoadedNotSmallestTree(t *testing.T) {
	p, ws := twoWorkers(t, FlavorVR, DefaultConfig())
	for i := 0; i < 20; i++ {
		p.Select(ws, Request{Text: strings.Repeat(fmt.Sprint(i), 50)}) // all to w1
	}
	ts := p.(TreeSizes).TreeSizes("default")
	if ts[ws[0].URL()] < 1000 || ts[ws[1].URL()] != 0 {
		t.Fatalf("setup tree sizes %v", ts)
	}
	fw(ws[1]).load.Store(1)
	if d := p.Select(ws, Request{Text: "completely new text"}); d.Index != 0 {
		t.Fatalf("picked %d, want 0: least loaded, not the worker with the smallest tree", d.Index)
	}
}

func TestCacheAwareStaleTenantRemovedThenFirstHealthy(t *testing.T) {
	for _, f := range flavors {
		p, ws := newCacheAwareFixture(t, f, DefaultConfig(), "http://a:1", "http://b:1", "http://c:1")
		fw(ws[0]).load.Store(1)
		p.Select(ws, Request{Text: "owned by b", Model: "m"}) // -> b (first least loaded)
		fw(ws[0]).load.Store(5)                               // a is busy but healthy
		fw(ws[1]).healthy.Store(false)
		d := p.Select(ws, Request{Text: "owned by b", Model: "m"})
		if d.Index != 0 || !d.Record {
			t.Fatalf("%v: picked %+v, want first healthy (0) despite its load", f, d)
		}
		ts := p.(TreeSizes).TreeSizes(map[Flavor]string{FlavorVR: "default", FlavorSG: "m"}[f])
		if _, ok := ts["http://b:1"]; ok {
			t.Fatalf("%v: stale tenant still in tree: %v", f, ts)
		}
		if ts["http://a:1"] != 0 {
			t.Fatalf("%v: fallback pick taught the tree: %v", f, ts)
		}
	}
}

func TestCacheAwareSeedsWorkersWithEmptyInsert(t *testing.T) {
	p := mustNew(t, FlavorSG, CacheAware, DefaultConfig())
	p.AddWorker("http://a:1", "m1")
	p.AddWorker("http://b:1", "m2")
	ts := p.(TreeSizes)
	if got := ts.TreeSizes("m1"); len(got) != 1 || got["http://a:1"] != 0 {
		t.Fatalf("m1 tree = %v", got)
	}
	if got := ts.TreeSizes("m2"); len(got) != 1 {
		t.Fatalf("m2 tree = %v", got)
	}
	p.RemoveWorker("http://a:1")
	if got := ts.TreeSizes("m1"); len(got) != 0 {
		t.Fatalf("after RemoveWorker m1 tree = %v", got)
	}
}

func TestCacheAwareTreeKeyVRDefaultSGModel(t *testing.T) {
	vr := mustNew(t, FlavorVR, CacheAware, DefaultConfig())
	vr.AddWorker("http://a:1", "Qwen/Qwen3-0.6B")
	if got := vr.(TreeSizes).TreeSizes("default"); len(got) != 1 {
		t.Fatalf("VR tree 'default' = %v", got)
	}
	sg := mustNew(t, FlavorSG, CacheAware, DefaultConfig())
	sg.AddWorker("http://a:1", "Qwen/Qwen3-0.6B")
	sg.AddWorker("http://b:1", "")
	if got := sg.(TreeSizes).TreeSizes("Qwen/Qwen3-0.6B"); len(got) != 1 {
		t.Fatalf("SG tree by model = %v", got)
	}
	if got := sg.(TreeSizes).TreeSizes("unknown"); len(got) != 1 {
		t.Fatalf("SG tree for empty model = %v", got)
	}
	// The SG key follows the first healthy worker's model when it has one.
	mw := []Worker{modelWorker{&fakeWorker{url: "http://a:1", model: "Qwen/Qwen3-0.6B"}}}
	mw[0].(modelWorker).healthy.Store(true)
	sg.Select(mw, Request{Text: "keyed by worker model", Model: "ignored"})
	if got := sg.(TreeSizes).TreeSizes("Qwen/Qwen3-0.6B")["http://a:1"]; got != len("keyed by worker model") {
		t.Fatalf("text not learned under the worker's model: %d", got)
	}
}

func TestCacheAwareNoTreeForModelPicksRandomHealthy(t *testing.T) {
	p := mustNew(t, FlavorSG, CacheAware, DefaultConfig(), seeded(7))
	ws := workers("http://a:1", "http://b:1", "http://c:1")
	seen := map[int]int{}
	for i := 0; i < 300; i++ {
		d := p.Select(ws, Request{Text: "no tree", Model: "never-added"})
		if !d.Record {
			t.Fatal("random pick not recorded")
		}
		seen[d.Index]++
	}
	if len(seen) != 3 {
		t.Fatalf("picks %v; without a tree the choice is random over healthy workers", seen)
	}
}

func TestCacheAwareSGPrefixSharingChatAllOnOneWorker(t *testing.T) {
	p, ws := twoWorkers(t, FlavorSG, DefaultConfig())
	prefix := strings.Repeat("You are a careful assistant who answers briefly. ", 10) // 500 chars
	counts := map[int]int{}
	for i := 0; i < 60; i++ {
		counts[p.Select(ws, Request{Text: prefix + fmt.Sprintf("Question %d: what is %d+%d?", i, i, i), Model: "m"}).Index]++
	}
	if counts[0] != 60 {
		t.Fatalf("split %v, want 60/0", counts)
	}
}

func TestCacheAwareConcurrentLoadSpreadsByInflight(t *testing.T) {
	p, ws := twoWorkers(t, FlavorVR, DefaultConfig())
	// Two chat requests in flight at once (router increments load on pick).
	d1 := p.Select(ws, Request{Text: ""})
	fw(ws[d1.Index]).load.Add(1)
	d2 := p.Select(ws, Request{Text: ""})
	if d1.Index == d2.Index {
		t.Fatalf("both in-flight requests went to %d", d1.Index)
	}
}

func TestCacheAwareInitWorkersLogsLikeVR(t *testing.T) {
	var sink logSink
	p := mustNew(t, FlavorVR, CacheAware, DefaultConfig(), sink.opt())
	p.(WorkerIniter).InitWorkers(nil, "")
	p.(WorkerIniter).InitWorkers([]string{"http://a:1", "http://b:1"}, "")
	want := []string{
		"Initializing workers for cache-aware policy: ",
		"Initializing workers for cache-aware policy: http://a:1, http://b:1",
		"Creating tree for model key: 'default' with 2 workers",
	}
	if got := sink.messages(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logs:\n%q\nwant\n%q", got, want)
	}
	if sink.recs[0].Target != "vllm_router_rs::policies::cache_aware" || sink.recs[0].File != "src/policies/cache_aware.rs" {
		t.Fatalf("record %+v", sink.recs[0])
	}
	if got := p.(TreeSizes).TreeSizes("default"); len(got) != 2 {
		t.Fatalf("InitWorkers did not seed: %v", got)
	}
}

func TestCacheAwareRunEvictsToMaxTreeSize(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EvictionInterval = 5 * time.Millisecond
	cfg.MaxTreeSize = 10
	p, ws := twoWorkers(t, FlavorVR, cfg)
	p.Select(ws, Request{Text: strings.Repeat("a", 40)})
	p.Select(ws, Request{Text: strings.Repeat("b", 8)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.(TreeSizes).TreeSizes("default")[ws[0].URL()] > 10 {
		if time.Now().After(deadline) {
			t.Fatal("tree never evicted below MaxTreeSize")
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	if m := p.Select(ws, Request{Text: strings.Repeat("a", 40)}); m.Index != 0 {
		t.Fatal("unexpected pick")
	}
}

func TestCacheAwareEvictionIntervalZeroDisablesEviction(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EvictionInterval = 0
	cfg.MaxTreeSize = 0
	p, ws := twoWorkers(t, FlavorSG, cfg)
	p.Select(ws, Request{Text: "kept", Model: "m"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := p.Run(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Run = %v", err)
	}
	if got := p.(TreeSizes).TreeSizes("m")[ws[0].URL()]; got != 4 {
		t.Fatalf("tree evicted with interval 0: %d", got)
	}
}

func TestCacheAwareNoHealthyWorkers(t *testing.T) {
	p, ws := twoWorkers(t, FlavorVR, DefaultConfig())
	for _, w := range ws {
		fw(w).healthy.Store(false)
	}
	if d := p.Select(ws, Request{Text: "x"}); d.Index != -1 || d.Record {
		t.Fatalf("%+v", d)
	}
	if d := p.Select(nil, Request{}); d.Index != -1 {
		t.Fatalf("%+v", d)
	}
}
