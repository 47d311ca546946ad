// Package sched is the engines' continuous-batching admission: at most
// MaxRunning sequences run at once and their KV tokens must fit the pool;
// everything else waits first-come-first-served (a head that does not fit
// blocks those behind it, as vLLM's and SGLang's FCFS schedulers do).
//
// A request that is admitted at once costs one mutex round trip: no goroutine,
// channel or timer. Only a request that has to wait gets a channel.
package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Config sizes a Scheduler.
type Config struct {
	// MaxRunning is the most sequences in the running batch (vLLM
	// --max-num-seqs, SGLang --max-running-requests). Must be >= 1.
	MaxRunning int
	// KVCapacity is the KV pool size in tokens. Must be >= 1.
	KVCapacity int
	// KVUnit is the pool's allocation unit in tokens (vLLM --block-size,
	// SGLang --page-size): Admit rounds a sequence's KV tokens up to whole
	// units. Values below 1 mean 1.
	KVUnit int
	// OnChange, if set, is called with the new state after every admission,
	// release and queue change. It runs under the scheduler's lock so the
	// values it publishes are never out of order: keep it cheap (set gauges).
	OnChange func(State)
}

// State is a snapshot of the scheduler.
type State struct {
	Running    int
	Waiting    int
	UsedKV     int // tokens held by running sequences
	WaitingKV  int // tokens the waiting sequences will need
	KVCapacity int
}

// Usage is UsedKV/KVCapacity, the 0-1 fraction both engines report.
func (s State) Usage() float64 {
	if s.KVCapacity <= 0 {
		return 0
	}
	return float64(s.UsedKV) / float64(s.KVCapacity)
}

// ErrTooLarge is returned for a sequence that could never fit the KV pool.
var ErrTooLarge = errors.New("sched: sequence needs more KV tokens than the pool holds")

// Scheduler admits sequences. The zero value is not usable; use New.
type Scheduler struct {
	cfg Config

	mu        sync.Mutex
	running   int
	usedKV    int
	waitingKV int
	queue     []*waiter
}

type waiter struct {
	kv       int
	admitted bool
	ready    chan struct{}
}

// New returns a Scheduler; it fixes non-positive sizes to 1.
func New(cfg Config) *Scheduler {
	cfg.MaxRunning = max(cfg.MaxRunning, 1)
	cfg.KVCapacity = max(cfg.KVCapacity, 1)
	cfg.KVUnit = max(cfg.KVUnit, 1)
	return &Scheduler{cfg: cfg}
}

// Ticket is an admitted sequence. Release it exactly once.
type Ticket struct {
	s        *Scheduler
	kv       int
	released bool
	// Queued is how long the sequence waited before admission.
	Queued time.Duration
	// Admitted is when the sequence joined the running batch.
	Admitted time.Time
}

// Admit blocks until a sequence holding kvTokens (rounded up to whole
// KVUnits) can run, or ctx ends (the sequence then leaves the queue and
// ctx's error is returned). A sequence larger than the pool is ErrTooLarge.
func (s *Scheduler) Admit(ctx context.Context, kvTokens int) (*Ticket, error) {
	kvTokens = (kvTokens + s.cfg.KVUnit - 1) / s.cfg.KVUnit * s.cfg.KVUnit
	if kvTokens > s.cfg.KVCapacity {
		return nil, fmt.Errorf("%w: %d > %d", ErrTooLarge, kvTokens, s.cfg.KVCapacity)
	}
	kvTokens = max(kvTokens, 0)
	enqueued := time.Now()
	s.mu.Lock()
	if len(s.queue) == 0 && s.fits(kvTokens) {
		s.running++
		s.usedKV += kvTokens
		s.changed()
		s.mu.Unlock()
		return &Ticket{s: s, kv: kvTokens, Admitted: enqueued}, nil
	}
	w := &waiter{kv: kvTokens, ready: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.waitingKV += kvTokens
	s.changed()
	s.mu.Unlock()

	select {
	case <-w.ready:
		now := time.Now()
		return &Ticket{s: s, kv: kvTokens, Queued: now.Sub(enqueued), Admitted: now}, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.admitted {
		// Admitted while ctx ended: give the slot back.
		s.mu.Unlock()
		(&Ticket{s: s, kv: kvTokens}).Release()
		return nil, ctx.Err()
	}
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	s.waitingKV -= kvTokens
	// The head may have changed: whoever is behind it may fit now.
	s.promote()
	s.changed()
	s.mu.Unlock()
	return nil, ctx.Err()
}

// Release frees the ticket's slot and KV tokens and admits waiters.
func (t *Ticket) Release() {
	if t == nil || t.released {
		return
	}
	t.released = true
	s := t.s
	s.mu.Lock()
	s.running--
	s.usedKV -= t.kv
	s.promote()
	s.changed()
	s.mu.Unlock()
}

// State returns the current state.
func (s *Scheduler) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state()
}

func (s *Scheduler) fits(kv int) bool {
	return s.running < s.cfg.MaxRunning && s.usedKV+kv <= s.cfg.KVCapacity
}

// promote admits queued sequences in order while the head fits.
func (s *Scheduler) promote() {
	n := 0
	for n < len(s.queue) && s.fits(s.queue[n].kv) {
		w := s.queue[n]
		s.running++
		s.usedKV += w.kv
		s.waitingKV -= w.kv
		w.admitted = true
		close(w.ready)
		n++
	}
	if n > 0 {
		rest := copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
	}
}

func (s *Scheduler) state() State {
	return State{Running: s.running, Waiting: len(s.queue), UsedKV: s.usedKV, WaitingKV: s.waitingKV, KVCapacity: s.cfg.KVCapacity}
}

func (s *Scheduler) changed() {
	if s.cfg.OnChange != nil {
		s.cfg.OnChange(s.state())
	}
}
