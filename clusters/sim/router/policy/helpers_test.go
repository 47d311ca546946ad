package policy

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeWorker is a candidate with settable health and load.
type fakeWorker struct {
	url     string
	model   string
	healthy atomic.Bool
	load    atomic.Int64
}

func (w *fakeWorker) URL() string   { return w.url }
func (w *fakeWorker) Healthy() bool { return w.healthy.Load() }
func (w *fakeWorker) Load() int64   { return w.load.Load() }

type modelWorker struct{ *fakeWorker }

func (w modelWorker) Model() string { return w.model }

func newWorker(url string) *fakeWorker {
	w := &fakeWorker{url: url}
	w.healthy.Store(true)
	return w
}

func workers(urls ...string) []Worker {
	out := make([]Worker, len(urls))
	for i, u := range urls {
		out[i] = newWorker(u)
	}
	return out
}

func fw(w Worker) *fakeWorker { return w.(*fakeWorker) }

func seeded(seed uint64) Option { return WithRandSource(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func mustNew(t testing.TB, f Flavor, name string, cfg Config, opts ...Option) Policy {
	t.Helper()
	p, err := New(f, name, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// addAll registers the workers with the policy as the routers do.
func addAll(p Policy, ws []Worker, model string) {
	for _, w := range ws {
		p.AddWorker(w.URL(), model)
	}
}

// logSink collects LogRecords from WithInfoLogger.
type logSink struct {
	mu   sync.Mutex
	recs []LogRecord
}

func (s *logSink) opt() Option {
	return WithInfoLogger(func(r LogRecord) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.recs = append(s.recs, r)
	})
}

func (s *logSink) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.recs))
	for i, r := range s.recs {
		out[i] = r.Message
	}
	return out
}

func (s *logSink) count(substr string) int {
	n := 0
	for _, m := range s.messages() {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}
