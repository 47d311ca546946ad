package policy

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
)

func TestRoundRobinStartsAtIndexZero(t *testing.T) {
	for _, f := range flavors {
		p := mustNew(t, f, RoundRobin, DefaultConfig())
		ws := workers("http://a:1", "http://b:1", "http://c:1")
		var got []int
		for i := 0; i < 7; i++ {
			got = append(got, p.Select(ws, Request{}).Index)
		}
		want := []int{0, 1, 2, 0, 1, 2, 0}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v: sequence %v, want %v", f, got, want)
			}
		}
	}
}

func TestRoundRobin120Over2Is60Each(t *testing.T) {
	for _, f := range flavors {
		p := mustNew(t, f, RoundRobin, DefaultConfig())
		ws := workers("http://a:1", "http://b:1")
		counts := map[int]int{}
		for i := 0; i < 120; i++ {
			d := p.Select(ws, Request{})
			if !d.Record {
				t.Fatal("round_robin pick not recorded")
			}
			counts[d.Index]++
		}
		if counts[0] != 60 || counts[1] != 60 {
			t.Fatalf("%v: split %v, want 60/60", f, counts)
		}
	}
}

func TestRoundRobinSharedAcrossEndpoints(t *testing.T) {
	p := mustNew(t, FlavorVR, RoundRobin, DefaultConfig())
	ws := workers("http://a:1", "http://b:1")
	// A chat request, a completions request and a retry of it share one counter.
	chat := p.Select(ws, Request{Text: ""}).Index
	completion := p.Select(ws, Request{Text: "Once upon a time"}).Index
	retry := p.Select(ws, Request{Text: "Once upon a time"}).Index
	if chat != 0 || completion != 1 || retry != 0 {
		t.Fatalf("picks %d %d %d, want 0 1 0 (one counter per policy instance)", chat, completion, retry)
	}
	// Another instance (e.g. the decode policy in P/D) has its own counter.
	q := mustNew(t, FlavorVR, RoundRobin, DefaultConfig())
	if d := q.Select(ws, Request{}); d.Index != 0 {
		t.Fatalf("second instance started at %d", d.Index)
	}
}

func TestRoundRobinCountsOverHealthyWorkersOnly(t *testing.T) {
	p := mustNew(t, FlavorSG, RoundRobin, DefaultConfig())
	ws := workers("http://a:1", "http://b:1", "http://c:1")
	fw(ws[1]).healthy.Store(false)
	var got []int
	for i := 0; i < 4; i++ {
		got = append(got, p.Select(ws, Request{}).Index)
	}
	if got[0] != 0 || got[1] != 2 || got[2] != 0 || got[3] != 2 {
		t.Fatalf("sequence %v, want [0 2 0 2]", got)
	}
	fw(ws[0]).healthy.Store(false)
	fw(ws[2]).healthy.Store(false)
	if d := p.Select(ws, Request{}); d.Index != -1 || d.Record {
		t.Fatalf("no healthy worker: %+v", d)
	}
}

func TestRoundRobinExactUnderConcurrency(t *testing.T) {
	p := mustNew(t, FlavorVR, RoundRobin, DefaultConfig())
	ws := workers("http://a:1", "http://b:1")
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				idx := p.Select(ws, Request{}).Index
				mu.Lock()
				counts[idx]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if counts[0] != 400 || counts[1] != 400 {
		t.Fatalf("split %v, want 400/400", counts)
	}
}

func TestRandomIsUniformOverHealthyWorkers(t *testing.T) {
	for _, f := range flavors {
		p := mustNew(t, f, Random, DefaultConfig(), seeded(3))
		ws := workers("http://a:1", "http://b:1", "http://c:1", "http://d:1")
		fw(ws[3]).healthy.Store(false)
		counts := map[int]int{}
		for i := 0; i < 3000; i++ {
			counts[p.Select(ws, Request{}).Index]++
		}
		if counts[3] != 0 {
			t.Fatalf("%v: unhealthy worker picked %d times", f, counts[3])
		}
		for i := 0; i < 3; i++ {
			if counts[i] < 850 || counts[i] > 1150 {
				t.Fatalf("%v: split %v is not uniform", f, counts)
			}
		}
	}
}

func TestPowerOfTwoVRSingleWorkerNotRecorded(t *testing.T) {
	ws := workers("http://a:1", "http://b:1")
	fw(ws[0]).healthy.Store(false)
	vr := mustNew(t, FlavorVR, PowerOfTwo, DefaultConfig())
	if d := vr.Select(ws, Request{}); d.Index != 1 || d.Record {
		t.Fatalf("VR single healthy worker: %+v, want index 1 without recording", d)
	}
	// SG records every successful pick in the router.
	sg := mustNew(t, FlavorSG, PowerOfTwo, DefaultConfig())
	if d := sg.Select(ws, Request{}); d.Index != 1 || !d.Record {
		t.Fatalf("SG single healthy worker: %+v", d)
	}
	fw(ws[0]).healthy.Store(true)
	if d := vr.Select(ws, Request{}); !d.Record {
		t.Fatalf("VR pick among two not recorded: %+v", d)
	}
}

func TestPowerOfTwoLowerLoadOfTheTwoWins(t *testing.T) {
	for _, f := range flavors {
		p := mustNew(t, f, PowerOfTwo, DefaultConfig(), seeded(5))
		ws := workers("http://a:1", "http://b:1")
		fw(ws[0]).load.Store(3)
		for i := 0; i < 50; i++ {
			if d := p.Select(ws, Request{}); d.Index != 1 {
				t.Fatalf("%v: picked the busier worker", f)
			}
		}
	}
}

func TestPowerOfTwoTieGoesToFirstDrawn(t *testing.T) {
	for _, f := range flavors {
		const seed = 11
		p := mustNew(t, f, PowerOfTwo, DefaultConfig(), seeded(seed))
		ws := workers("http://a:1", "http://b:1", "http://c:1", "http://d:1", "http://e:1")
		// Replay the draws with the same generator: the first drawn wins ties.
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		for i := 0; i < 100; i++ {
			first := r.IntN(5)
			if f == FlavorVR {
				for second := r.IntN(5); second == first; second = r.IntN(5) {
				}
			} else {
				r.IntN(4)
			}
			if d := p.Select(ws, Request{}); d.Index != first {
				t.Fatalf("%v: draw %d picked %d, want first drawn %d", f, i, d.Index, first)
			}
		}
	}
}

func TestPowerOfTwoVRIsEffectivelyRandomWithoutLoads(t *testing.T) {
	p := mustNew(t, FlavorVR, PowerOfTwo, DefaultConfig(), seeded(9))
	ws := workers("http://a:1", "http://b:1", "http://c:1")
	counts := map[int]int{}
	for i := 0; i < 3000; i++ {
		counts[p.Select(ws, Request{}).Index]++
	}
	for i := 0; i < 3; i++ {
		if counts[i] < 850 || counts[i] > 1150 {
			t.Fatalf("split %v is not uniform", counts)
		}
	}
}

func TestPowerOfTwoSGComparesPolledLoadsOnlyWhenBothKnown(t *testing.T) {
	p := mustNew(t, FlavorSG, PowerOfTwo, DefaultConfig(), seeded(2))
	ws := workers("http://a:1", "http://b:1")
	// Local counts favour b; polled token loads favour a.
	fw(ws[0]).load.Store(5)
	p.(LoadUpdater).UpdateLoads(map[string]int64{"http://a:1": 0, "http://b:1": 900})
	for i := 0; i < 20; i++ {
		if d := p.Select(ws, Request{}); d.Index != 0 {
			t.Fatalf("both polled: picked %d, want 0", d.Index)
		}
	}
	// Only a has polled data: both fall back to local counts.
	p.(LoadUpdater).UpdateLoads(map[string]int64{"http://a:1": 0})
	for i := 0; i < 20; i++ {
		if d := p.Select(ws, Request{}); d.Index != 1 {
			t.Fatalf("one polled: picked %d, want 1 by local count", d.Index)
		}
	}
	// A failed poll is -1 in the source and so looks least loaded.
	p.(LoadUpdater).UpdateLoads(map[string]int64{"http://a:1": 10, "http://b:1": -1})
	if d := p.Select(ws, Request{}); d.Index != 1 {
		t.Fatalf("failed poll (-1): picked %d, want 1", d.Index)
	}
}

func TestPowerOfTwoVRUsesCachedLoadPerWorker(t *testing.T) {
	p := mustNew(t, FlavorVR, PowerOfTwo, DefaultConfig(), seeded(2))
	ws := workers("http://a:1", "http://b:1")
	fw(ws[0]).load.Store(50)
	fw(ws[1]).load.Store(3)
	// VR falls back per worker: a's cached 0 against b's local 3.
	p.(LoadUpdater).UpdateLoads(map[string]int64{"http://a:1": 0})
	for i := 0; i < 20; i++ {
		if d := p.Select(ws, Request{}); d.Index != 0 {
			t.Fatalf("picked %d, want 0", d.Index)
		}
	}
}

func TestPowerOfTwoLoadSourceOption(t *testing.T) {
	src := LoadSourceFunc(func(url string) (int64, bool) {
		return map[string]int64{"http://a:1": 100, "http://b:1": 1}[url], true
	})
	p := mustNew(t, FlavorSG, PowerOfTwo, DefaultConfig(), seeded(4), WithLoadSource(src))
	ws := workers("http://a:1", "http://b:1")
	for i := 0; i < 20; i++ {
		if d := p.Select(ws, Request{Headers: http.Header{}}); d.Index != 1 {
			t.Fatalf("picked %d, want 1 by the load source", d.Index)
		}
	}
}

func TestPowerOfTwoVRLogsSelection(t *testing.T) {
	var sink logSink
	p := mustNew(t, FlavorVR, PowerOfTwo, DefaultConfig(), seeded(1), sink.opt())
	ws := workers("http://a:1", "http://b:1")
	fw(ws[0]).load.Store(2)
	p.Select(ws, Request{})
	msgs := sink.messages()
	if len(msgs) != 1 || (msgs[0] != "Power-of-two selection: http://a:1=2 vs http://b:1=0 -> selected http://b:1" &&
		msgs[0] != "Power-of-two selection: http://b:1=0 vs http://a:1=2 -> selected http://b:1") {
		t.Fatalf("logs %q", msgs)
	}
	if sink.recs[0].Target != "vllm_router_rs::policies::power_of_two" || sink.recs[0].Line != 82 {
		t.Fatalf("record %+v", sink.recs[0])
	}
}
