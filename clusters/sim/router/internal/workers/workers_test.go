package workers

import (
	"math/rand/v2"
	"testing"
	"time"
)

func cb() CircuitConfig {
	return CircuitConfig{FailureThreshold: 3, SuccessThreshold: 2, Timeout: time.Hour}
}

func TestRegistrationOrderForSG(t *testing.T) {
	r := NewRegistry(OrderRegistration, rand.New(rand.NewPCG(1, 2)))
	for _, u := range []string{"http://c", "http://a", "http://b"} {
		r.Add(New(u, 1, Regular, cb()))
	}
	if got := r.URLs(); got[0] != "http://c" || got[1] != "http://a" || got[2] != "http://b" {
		t.Fatalf("%v", got)
	}
	if r.Add(New("http://a", 1, Regular, cb())) {
		t.Fatal("duplicate added")
	}
}

func TestRandomOrderStableUntilMembershipChanges(t *testing.T) {
	r := NewRegistry(OrderRandom, rand.New(rand.NewPCG(7, 7)))
	for _, u := range []string{"http://a", "http://b", "http://c", "http://d"} {
		r.Add(New(u, 1, Regular, cb()))
	}
	first := r.URLs()
	for i := 0; i < 5; i++ {
		if got := r.URLs(); got[0] != first[0] || got[3] != first[3] {
			t.Fatalf("order moved: %v vs %v", got, first)
		}
	}
	rev := r.Revision()
	r.Remove(first[1])
	if r.Revision() == rev || len(r.URLs()) != 3 {
		t.Fatalf("remove not recorded")
	}
}

func TestCircuitOpensAfterConsecutiveFailuresAndHalfOpens(t *testing.T) {
	now := time.Unix(0, 0)
	c := NewCircuitBreaker(CircuitConfig{FailureThreshold: 3, SuccessThreshold: 2, Timeout: time.Minute})
	c.now = func() time.Time { return now }
	c.RecordOutcome(false)
	c.RecordOutcome(true) // resets the streak
	c.RecordOutcome(false)
	c.RecordOutcome(false)
	if !c.CanExecute() {
		t.Fatal("opened early")
	}
	if _, to, changed := c.RecordOutcome(false); !changed || to != Open || c.CanExecute() {
		t.Fatal("did not open on the third consecutive failure")
	}
	now = now.Add(time.Minute)
	if c.State() != HalfOpen {
		t.Fatal("not half-open after timeout")
	}
	c.RecordOutcome(true)
	if _, to, _ := c.RecordOutcome(true); to != Closed {
		t.Fatal("not closed after successes")
	}
}

func TestHealthThresholds(t *testing.T) {
	w := New("http://a", 1, Regular, cb())
	if w.HealthResult(false, 3, 2) || w.HealthResult(false, 3, 2) {
		t.Fatal("flipped before threshold")
	}
	if !w.HealthResult(false, 3, 2) || w.Healthy() {
		t.Fatal("not unhealthy after 3 failures")
	}
	w.HealthResult(true, 3, 2)
	if !w.HealthResult(true, 3, 2) || !w.Healthy() {
		t.Fatal("not healthy after 2 successes")
	}
	if w.DecLoad() != 0 || w.IncLoad() != 1 || w.DecLoad() != 0 || w.DecLoad() != 0 {
		t.Fatal("load accounting")
	}
}
