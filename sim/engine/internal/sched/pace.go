package sched

import (
	"context"
	"time"
)

// Pacer waits out a sequence's latencies (time to first token, inter-token
// gaps). It allocates its one timer on the first positive wait and reuses it,
// so a sequence run with zero latencies never touches the timer heap.
type Pacer struct {
	t *time.Timer
}

// Wait returns after d, or early with ctx's error when ctx ends first.
// A d <= 0 returns ctx's error (nil while ctx is live) at once.
func (p *Pacer) Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if p.t == nil {
		p.t = time.NewTimer(d)
	} else {
		p.t.Reset(d)
	}
	select {
	case <-p.t.C:
		return nil
	case <-ctx.Done():
		p.t.Stop()
		return ctx.Err()
	}
}

// Stop releases the timer.
func (p *Pacer) Stop() {
	if p.t != nil {
		p.t.Stop()
	}
}
