package traffic

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgressCountsDoneAndErrorsAndEndsWithAFinalCall runs concurrent
// traffic where every third request fails, slowly enough for several
// periodic calls, and checks what Progress saw: never more than the total,
// never going backwards, never two calls at once, the last one Final with
// every request counted, and none after Run returned.
func TestProgressCountsDoneAndErrorsAndEndsWithAFinalCall(t *testing.T) {
	var f fakeOpenAI
	var n sync.Mutex
	sent := 0
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		n.Lock()
		sent++
		fail := sent%3 == 0
		n.Unlock()
		time.Sleep(5 * time.Millisecond)
		if fail {
			http.Error(w, `{"error":{"message":"no"}}`, http.StatusServiceUnavailable)
			return
		}
		answerOK(w, req)
	})
	var mu sync.Mutex
	var calls []Progress
	var busy atomic.Bool
	p := plan(srv.URL, 60)
	p.Concurrency = 4
	p.ProgressEvery = 10 * time.Millisecond
	p.Progress = func(pr Progress) {
		if !busy.CompareAndSwap(false, true) {
			t.Error("overlapping Progress calls")
		}
		mu.Lock()
		calls = append(calls, pr)
		mu.Unlock()
		time.Sleep(time.Millisecond) // widen the window an overlap would hit
		busy.Store(false)
	}
	mustRun(t, p)
	mu.Lock()
	got := append([]Progress(nil), calls...)
	mu.Unlock()
	if len(got) < 3 {
		t.Fatalf("%d progress calls, want the first, some periodic ones and the final one", len(got))
	}
	for i, c := range got {
		if c.Total != 60 || c.Done > 60 || c.Errors > c.Done || (i > 0 && c.Done < got[i-1].Done) {
			t.Errorf("call %d: %+v", i, c)
		}
		if c.Final != (i == len(got)-1) {
			t.Errorf("call %d Final=%v", i, c.Final)
		}
	}
	last := got[len(got)-1]
	if last.Done != 60 || last.Errors != 20 || last.Rate() <= 0 {
		t.Errorf("final %+v, want 60 done, 20 errors", last)
	}
	time.Sleep(30 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != len(got) {
		t.Errorf("Progress was called after Run returned")
	}
}

func TestNoProgressCallbackStartsNoGoroutine(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	mustRun(t, plan(srv.URL, 3)) // goleak in TestMain checks nothing stayed
}
