package traffic

import (
	"sync/atomic"
	"time"
)

// Progress is how far a run has got: what Plan.Progress receives.
type Progress struct {
	// Done of Total requests have finished (or were given up unsent);
	// Errors of them did not end OK.
	Done, Total, Errors int
	// Elapsed since the run started.
	Elapsed time.Duration
	// Final is the last call, after every request finished.
	Final bool
}

// Rate is finished requests per second so far.
func (p Progress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Done) / p.Elapsed.Seconds()
}

// progressCounter counts finished requests for Plan.Progress; the workers
// add to it, one ticker goroutine reads it.
type progressCounter struct {
	done, errors atomic.Int64
}

func (c *progressCounter) finished(class Class) {
	c.done.Add(1)
	if class != ClassOK {
		c.errors.Add(1)
	}
}

func (c *progressCounter) read(total int, started time.Time, final bool) Progress {
	return Progress{Done: int(c.done.Load()), Total: total, Errors: int(c.errors.Load()), Elapsed: time.Since(started), Final: final}
}

// start calls p.Progress every p.ProgressEvery until the returned stop,
// which waits for the ticker goroutine to end and then makes the final
// call, so no call happens after Run returns and none overlap.
func (c *progressCounter) start(p Plan, started time.Time) (stop func()) {
	if p.Progress == nil {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(p.ProgressEvery)
		defer t.Stop()
		p.Progress(c.read(p.Requests, started, false))
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.Progress(c.read(p.Requests, started, false))
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
		p.Progress(c.read(p.Requests, started, true))
	}
}
