package clusters

import (
	"math"
	"testing"
	"time"
)

func TestCostLedgerCountsStartedReadyAndHeldSeconds(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var l CostLedger
	// a: 2 accelerators, Ready at +10s, removed at +70s: 120 accelerator-seconds.
	l.Observe(PodObservation{UID: "a", Accelerators: 2})
	l.Observe(PodObservation{UID: "a", Accelerators: 2, Ready: true, ReadySince: t0.Add(10 * time.Second)})
	l.Observe(PodObservation{UID: "a", Accelerators: 2, Ready: true, ReadySince: t0.Add(40 * time.Second)}) // Ready again after a restart: the first Ready counts
	l.Observe(PodObservation{UID: "a", GoneAt: t0.Add(70 * time.Second)})
	// b: never Ready (image pull failure): started, not Ready, no seconds.
	l.Observe(PodObservation{UID: "b", Accelerators: 4})
	l.Observe(PodObservation{UID: "b", GoneAt: t0.Add(20 * time.Second)})
	// c: 1 accelerator, Ready at +50s and still there at +100s: 50.
	l.Observe(PodObservation{UID: "c", Accelerators: 1, Ready: true, ReadySince: t0.Add(50 * time.Second)})
	// A Pod first seen as it goes (a missed watch) still counts started.
	l.Observe(PodObservation{UID: "d", GoneAt: t0.Add(5 * time.Second)})
	l.Observe(PodObservation{}) // no UID: ignored

	got := l.Cost(t0.Add(100 * time.Second))
	if got.EnginePodsStarted != 4 || got.EnginePodsReady != 2 || math.Abs(got.AcceleratorSeconds-170) > 1e-9 {
		t.Fatalf("cost %+v, want 4 started, 2 ready, 170 accelerator-seconds", got)
	}
}

func TestCostLedgerIsFinalAfterClose(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var l CostLedger
	l.Observe(PodObservation{UID: "a", Accelerators: 1, Ready: true, ReadySince: t0})
	l.Close(t0.Add(30 * time.Second))
	l.Close(t0.Add(90 * time.Second)) // the first Close stands
	l.Observe(PodObservation{UID: "late", Accelerators: 8, Ready: true, ReadySince: t0})
	for _, now := range []time.Time{t0.Add(30 * time.Second), t0.Add(time.Hour)} {
		if got := l.Cost(now); got != (Cost{EnginePodsStarted: 1, EnginePodsReady: 1, AcceleratorSeconds: 30}) {
			t.Fatalf("cost at %v after Close: %+v", now.Sub(t0), got)
		}
	}
}

func TestCostLedgerNeverCountsNegativeTime(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var l CostLedger
	// Updates delivered out of order: the removal before the Ready.
	l.Observe(PodObservation{UID: "a", Accelerators: 1, GoneAt: t0})
	l.Observe(PodObservation{UID: "a", Accelerators: 1, Ready: true, ReadySince: t0.Add(time.Second)})
	if got := l.Cost(t0.Add(time.Minute)); got.EnginePodsReady != 1 || got.AcceleratorSeconds != 0 {
		t.Fatalf("cost %+v", got)
	}
	var zero CostLedger
	if got := zero.Cost(time.Now()); got != (Cost{}) {
		t.Fatalf("empty ledger %+v", got)
	}
}
