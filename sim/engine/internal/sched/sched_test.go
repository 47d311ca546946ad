package sched

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestExtraSequencesWaitFCFS(t *testing.T) {
	var mu sync.Mutex
	var seen []State
	s := New(Config{MaxRunning: 2, KVCapacity: 1000, OnChange: func(st State) {
		mu.Lock()
		seen = append(seen, st)
		mu.Unlock()
	}})
	ctx := context.Background()
	a, err := s.Admit(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Admit(ctx, 10)
	order := make(chan int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			tk, err := s.Admit(ctx, 10)
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			tk.Release()
		})
		waitFor(t, "waiter queued", func() bool { return s.State().Waiting == i+1 })
	}
	if st := s.State(); st.Running != 2 || st.Waiting != 2 || st.UsedKV != 20 || st.WaitingKV != 20 {
		t.Fatalf("state %+v, want 2 running (20 KV) and 2 waiting (20 KV)", st)
	}
	a.Release()
	if first := <-order; first != 0 {
		t.Fatalf("waiter %d admitted first, want FCFS (0)", first)
	}
	b.Release()
	<-order
	wg.Wait()
	if st := s.State(); st != (State{KVCapacity: 1000}) {
		t.Fatalf("final state %+v, want empty", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if last := seen[len(seen)-1]; last.Running != 0 || last.Waiting != 0 {
		t.Fatalf("last published state %+v, want idle", last)
	}
}

func TestKVCapacityHoldsTheHeadAndBlocksThoseBehind(t *testing.T) {
	s := New(Config{MaxRunning: 10, KVCapacity: 100})
	ctx := context.Background()
	big, _ := s.Admit(ctx, 80)
	done := make(chan string, 2)
	go func() {
		tk, _ := s.Admit(ctx, 50) // does not fit next to 80
		done <- "head"
		tk.Release()
	}()
	waitFor(t, "head queued", func() bool { return s.State().Waiting == 1 })
	go func() {
		tk, _ := s.Admit(ctx, 5) // would fit, but FCFS keeps it behind the head
		done <- "second"
		tk.Release()
	}()
	waitFor(t, "second queued", func() bool { return s.State().Waiting == 2 })
	select {
	case who := <-done:
		t.Fatalf("%s admitted past a blocked head", who)
	case <-time.After(20 * time.Millisecond):
	}
	big.Release()
	got := map[string]bool{<-done: true, <-done: true}
	if !got["head"] || !got["second"] {
		t.Fatalf("admitted %v", got)
	}
}

func TestCancelledWaiterLeavesQueueAndUnblocksThoseBehind(t *testing.T) {
	s := New(Config{MaxRunning: 1, KVCapacity: 100})
	ctx := context.Background()
	run, _ := s.Admit(ctx, 1)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Admit(cctx, 1)
		errc <- err
	}()
	waitFor(t, "queued", func() bool { return s.State().Waiting == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if st := s.State(); st.Waiting != 0 || st.WaitingKV != 0 {
		t.Fatalf("cancelled waiter still queued: %+v", st)
	}
	run.Release()
	if st := s.State(); st.Running != 0 {
		t.Fatalf("state %+v", st)
	}
}

func TestTooLargeSequenceIsRefused(t *testing.T) {
	s := New(Config{MaxRunning: 1, KVCapacity: 10})
	if _, err := s.Admit(context.Background(), 11); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestPacerWaitsAtLeastAndStopsOnCancel(t *testing.T) {
	var p Pacer
	defer p.Stop()
	start := time.Now()
	if err := p.Wait(context.Background(), 3*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 3*time.Millisecond {
		t.Fatalf("waited %v, want >= 3ms", el)
	}
	if err := p.Wait(context.Background(), 0); err != nil {
		t.Fatalf("zero wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func BenchmarkAdmitRelease(b *testing.B) {
	s := New(Config{MaxRunning: 256, KVCapacity: 1 << 20, OnChange: func(State) {}})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, _ := s.Admit(ctx, 100)
			tk.Release()
		}
	})
}

func TestKVIsReservedInWholeUnits(t *testing.T) {
	s := New(Config{MaxRunning: 4, KVCapacity: 64, KVUnit: 16})
	ctx := context.Background()
	a, err := s.Admit(ctx, 17) // two units
	if err != nil || s.State().UsedKV != 32 {
		t.Fatalf("17 tokens: %v, used %d, want 32", err, s.State().UsedKV)
	}
	b, err := s.Admit(ctx, 32) // exactly two units
	if err != nil || s.State().UsedKV != 64 {
		t.Fatalf("32 more tokens: %v, used %d, want 64", err, s.State().UsedKV)
	}
	a.Release()
	b.Release()
	if _, err := s.Admit(ctx, 65); !errors.Is(err, ErrTooLarge) { // five units in a four-unit pool
		t.Fatalf("65 tokens: %v, want ErrTooLarge", err)
	}
	c, err := s.Admit(ctx, 49) // rounds to the whole pool, which fits
	if err != nil || s.State().UsedKV != 64 {
		t.Fatalf("49 tokens: %v, used %d, want 64", err, s.State().UsedKV)
	}
	c.Release()
}
