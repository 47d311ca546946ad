package routerbase

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/tracing"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuf is a log sink safe for the server goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var site = tracing.Site{Target: "t", File: "f.rs", Line: 1}

func TestServeDrainsOnTerminateAndReturnsZero(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out, errw syncBuf
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), time.Second, tracing.New(&out, tracing.Info), site, &errw)
	}()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case c := <-code:
		if c != 0 || !strings.Contains(out.String(), "Received terminate signal, starting graceful shutdown") || errw.String() != "" {
			t.Fatalf("exit %d, log %q, stderr %q", c, out.String(), errw.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after SIGTERM")
	}
}

func TestServeFailureIsMainsErrorAndExit1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = ln.Close()
	var errw syncBuf
	if c := Serve(context.Background(), ln, http.NotFoundHandler(), time.Second, tracing.New(&syncBuf{}, tracing.Info), site, &errw); c != 1 || !strings.HasPrefix(errw.String(), "Error: ") {
		t.Fatalf("exit %d stderr %q", c, errw.String())
	}
}

func TestServeMetricsBindFailureIsRustPanicExit101(t *testing.T) {
	g := NewGroup()
	defer g.Stop()
	c := &proc.Container{Listen: func(string) (net.Listener, error) { return nil, &net.AddrError{Err: "refused", Addr: "x"} }}
	err := ServeMetrics(g, c, "0.0.0.0:9090", prometheus.NewRegistry())
	var errw syncBuf
	if code := Panic(&errw, "src/metrics.rs:343:10", err); code != 101 {
		t.Fatalf("exit %d", code)
	}
	want := "\nthread 'main' panicked at src/metrics.rs:343:10:\nfailed to install Prometheus metrics exporter: FailedToCreateHTTPListener(\"address x: refused\")\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
	if errw.String() != want {
		t.Fatalf("stderr %q", errw.String())
	}
}

// runCounter is a policy that counts its Run calls.
type runCounter struct {
	name string
	runs *atomic.Int32
}

func (p *runCounter) Name() string { return p.name }
func (p *runCounter) Select([]policy.Worker, policy.Request) policy.Decision {
	return policy.Decision{}
}
func (p *runCounter) AddWorker(string, string) {}
func (p *runCounter) RemoveWorker(string)      {}
func (p *runCounter) Run(ctx context.Context) error {
	p.runs.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestPoliciesRunEachInstanceOnce: VR's PD pools share the regular
// instance, whose background work must run once.
func TestPoliciesRunEachInstanceOnce(t *testing.T) {
	var a, b atomic.Int32
	pa, pb := &runCounter{"a", &a}, &runCounter{"b", &b}
	ps := Policies{Regular: pa, Prefill: pa, Decode: pb}
	g := NewGroup()
	ps.Run(g)
	g.Stop()
	if a.Load() != 1 || b.Load() != 1 {
		t.Fatalf("runs a=%d b=%d", a.Load(), b.Load())
	}
	if ps.For(workers.Regular) != pa || ps.For(workers.Prefill) != pa || ps.For(workers.Decode) != pb {
		t.Fatalf("For picked the wrong pool")
	}
}

func TestRandFollowsSIMRouterSeed(t *testing.T) {
	c := &proc.Container{Env: map[string]string{"SIM_ROUTER_SEED": " 42 "}}
	if Rand(c).Uint64() != Rand(c).Uint64() {
		t.Fatalf("same seed, different draws")
	}
	other := &proc.Container{Env: map[string]string{"SIM_ROUTER_SEED": "43"}}
	if Rand(c).Uint64() == Rand(other).Uint64() {
		t.Fatalf("different seeds, same draw")
	}
}

func TestCircuitSeriesRecordsOutcomesAndTransitions(t *testing.T) {
	r := prometheus.NewRegistry()
	s := CircuitSeries{
		State:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cb_state"}, []string{"worker"}),
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cb_transitions"}, []string{"worker", "from", "to"}),
		Outcomes:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cb_outcomes"}, []string{"worker", "outcome"}),
	}
	r.MustRegister(s.State, s.Transitions, s.Outcomes)
	reg := workers.NewRegistry(workers.OrderRegistration, rand.New(rand.NewPCG(1, 2)))
	w := workers.New("http://w", 80, workers.Regular, workers.CircuitConfig{FailureThreshold: 2, SuccessThreshold: 1, Timeout: time.Hour})
	reg.Add(w)
	rev := reg.Revision()
	s.Record(reg, w, true)
	s.Record(reg, w, false)
	if reg.Revision() != rev {
		t.Fatalf("revision moved without a transition")
	}
	s.Record(reg, w, false)
	if got := value(s.Outcomes.WithLabelValues("http://w", "failure")); got != 2 {
		t.Errorf("failures %v", got)
	}
	if got := value(s.Outcomes.WithLabelValues("http://w", "success")); got != 1 {
		t.Errorf("successes %v", got)
	}
	if got := value(s.Transitions.WithLabelValues("http://w", "closed", "open")); got != 1 {
		t.Errorf("closed->open %v", got)
	}
	if got := value(s.State.WithLabelValues("http://w")); got != 1 || reg.Revision() != rev+1 || !w.CircuitOpen() {
		t.Errorf("state %v revision %d->%d open=%v", got, rev, reg.Revision(), w.CircuitOpen())
	}
}

// value reads a counter's or a gauge's value.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	_ = m.Write(&d)
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// TestObserveListsRegisteredThenWaiting: the observer view has the
// registered workers, then the Pods still waiting for their health gate
// (not registered), and forgets a Pod once its registration returns.
func TestObserveListsRegisteredThenWaiting(t *testing.T) {
	reg := workers.NewRegistry(workers.OrderRegistration, rand.New(rand.NewPCG(1, 2)))
	w := workers.New("http://a:8000", 8000, workers.Regular, workers.CircuitConfig{FailureThreshold: 1, SuccessThreshold: 1, Timeout: time.Hour})
	w.PodName = "pod-a"
	reg.Add(w)
	var p Pending
	doneA := p.Track(discovery.Target{URL: "http://a:8000", Port: 8000, Role: workers.Regular}) // registered meanwhile
	doneB := p.Track(discovery.Target{URL: "http://b:8000", Port: 8000, Role: workers.Decode, Pod: proc.Pod{PodInfo: proc.PodInfo{Name: "pod-b"}}})
	defer doneA()
	rev, view := p.Observe(reg)()
	if rev != reg.Revision() || len(view) != 2 {
		t.Fatalf("rev %d view %+v", rev, view)
	}
	if v := view[0]; v.URL != "http://a:8000" || v.PodHint != "pod-a" || !v.Selection.Registered || !v.Selection.InSelection || v.WorkerID == "" {
		t.Fatalf("registered %+v", v)
	}
	if v := view[1]; v.URL != "http://b:8000" || v.Role != "decode" || v.PodHint != "pod-b" || v.Selection.Registered {
		t.Fatalf("pending %+v", v)
	}
	doneB()
	if _, view := p.Observe(reg)(); len(view) != 1 {
		t.Fatalf("pending Pod kept after its registration returned: %+v", view)
	}
}

func TestStartDiscoveryWithoutKubernetesLogsTheFailure(t *testing.T) {
	var out syncBuf
	g := NewGroup()
	defer g.Stop()
	StartDiscovery(g, nil, discovery.Config{}, Discovery{Log: tracing.New(&out, tracing.Info), Failed: site, Started: site})
	if got := tracing.Strip(out.String()); !strings.Contains(got, "ERROR t: f.rs:1: Failed to start service discovery: no Kubernetes API available") || strings.Contains(got, "Service discovery started") {
		t.Fatalf("log %q", got)
	}
}
