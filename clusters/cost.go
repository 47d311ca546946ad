package clusters

import (
	"sync"
	"time"
)

// PodObservation is what a target saw of one engine Pod at one moment.
type PodObservation struct {
	// UID identifies the Pod; its first observation counts it started.
	UID string
	// Accelerators is how many accelerators the Pod requests (0 where the
	// target holds none).
	Accelerators int64
	// Ready: the Pod is Ready now, since ReadySince (zero: the time of the
	// observation is not known better than "now").
	Ready      bool
	ReadySince time.Time
	// GoneAt, when set, is when the Pod was removed.
	GoneAt time.Time
}

// CostLedger turns a target's observations of one deployment's engine Pods
// into its Cost. Both targets feed one, so the figures mean the same on
// each. It is safe for concurrent use; the zero value is ready.
type CostLedger struct {
	mu     sync.Mutex
	pods   map[string]*podCost
	closed time.Time
}

type podCost struct {
	accelerators int64
	readyAt      time.Time // first Ready; zero while never Ready
	goneAt       time.Time
}

// Observe records o. Observations after Close are ignored: the cost of a
// deleted deployment is final.
func (l *CostLedger) Observe(o PodObservation) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed.IsZero() || o.UID == "" {
		return
	}
	if l.pods == nil {
		l.pods = map[string]*podCost{}
	}
	p := l.pods[o.UID]
	if p == nil {
		p = &podCost{}
		l.pods[o.UID] = p
	}
	if o.Accelerators > p.accelerators {
		p.accelerators = o.Accelerators
	}
	if o.Ready {
		since := o.ReadySince
		if since.IsZero() {
			since = now
		}
		if p.readyAt.IsZero() || since.Before(p.readyAt) {
			p.readyAt = since
		}
	}
	if !o.GoneAt.IsZero() && p.goneAt.IsZero() {
		p.goneAt = o.GoneAt
	}
}

// Close ends the accounting at at: Pods still present are counted up to
// then, and later observations are ignored. Closing twice keeps the first.
func (l *CostLedger) Close(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.IsZero() {
		l.closed = at
	}
}

// Cost sums the ledger up to now (or up to Close).
func (l *CostLedger) Cost(now time.Time) Cost {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed.IsZero() {
		now = l.closed
	}
	var c Cost
	for _, p := range l.pods {
		c.EnginePodsStarted++
		if p.readyAt.IsZero() {
			continue
		}
		c.EnginePodsReady++
		end := now
		if !p.goneAt.IsZero() && p.goneAt.Before(end) {
			end = p.goneAt
		}
		if held := end.Sub(p.readyAt); held > 0 {
			c.AcceleratorSeconds += float64(p.accelerators) * held.Seconds()
		}
	}
	return c
}
