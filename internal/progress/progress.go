// Package progress carries live traffic progress from the suite's Ginkgo
// processes to the command that started them (cmd/e2e), which owns the
// terminal: a line per running spec that updates in place on a terminal,
// and plain periodic lines in a CI log.
//
// Ginkgo holds a parallel process's output until its spec ends, so the
// processes write Events to a named pipe (FIFO) whose path cmd/e2e passes
// them in the environment (config.EnvProgressFIFO) instead. A FIFO is a file, not a port: nothing
// listens, and nothing is left when the run ends. Writes are non-blocking
// and each event is one line shorter than PIPE_BUF, so writers never wait
// and lines never interleave; an event that does not fit is dropped.
package progress

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// maxLine keeps an event under PIPE_BUF (4096 on Linux), which the kernel
// writes to a pipe atomically.
const maxLine = 4000

// Event is one progress report of a spec's traffic.
type Event struct {
	// Proc is the Ginkgo parallel process; Spec names what runs there.
	Proc int    `json:"proc"`
	Spec string `json:"spec"`
	// Done of Total requests have finished, Errors of them failed.
	Done   int `json:"done"`
	Total  int `json:"total"`
	Errors int `json:"errors"`
	// Elapsed since the traffic started.
	Elapsed time.Duration `json:"elapsed"`
	// Final is the last event of the traffic.
	Final bool `json:"final,omitempty"`
}

// Rate is requests finished per second so far.
func (e Event) Rate() float64 {
	if e.Elapsed <= 0 {
		return 0
	}
	return float64(e.Done) / e.Elapsed.Seconds()
}

// String is the event as one line: "affinity vllm-router+vLLM: 60/120
// requests, 0 errors, 64.2 req/s".
func (e Event) String() string {
	s := fmt.Sprintf("%s: %d/%d requests, %d errors, %.1f req/s", e.Spec, e.Done, e.Total, e.Errors, e.Rate())
	if e.Final {
		s += ", done in " + e.Elapsed.Round(100*time.Millisecond).String()
	}
	return s
}

// Sink writes events to the FIFO Serve made. A nil Sink drops them; Send
// is safe for concurrent use.
type Sink struct {
	mu sync.Mutex
	fd int
}

// Open opens the FIFO at path for writing; nil when there is none (path is
// empty: the suite runs without cmd/e2e) or its reader is gone.
func Open(path string) *Sink {
	if path == "" {
		return nil
	}
	// O_NONBLOCK: open fails at once (ENXIO) when no reader has the FIFO
	// open, and a full pipe drops the event rather than stalling traffic.
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return &Sink{fd: fd}
}

// Send writes e as one JSON line; it never blocks.
func (s *Sink) Send(e Event) error {
	if s == nil {
		return nil
	}
	line, err := encode(e)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return errors.New("progress: sink closed")
	}
	_, err = syscall.Write(s.fd, line)
	return err
}

// Close closes the FIFO.
func (s *Sink) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil
	}
	err := syscall.Close(s.fd)
	s.fd = -1
	return err
}

// encode is e as a JSON line under maxLine bytes, its Spec shortened if
// need be.
func encode(e Event) ([]byte, error) {
	for {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		if len(b) < maxLine {
			return append(b, '\n'), nil
		}
		e.Spec = e.Spec[:len(e.Spec)/2]
	}
}
