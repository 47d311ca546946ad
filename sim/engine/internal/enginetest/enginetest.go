// Package enginetest runs an engine program (vllm.Main, sglang.Main) as a
// container on loopback for tests: whatever address the program listens on,
// it gets 127.0.0.1 and a port picked in advance, so the URL is known before
// the program binds it (and a connection before that is refused, as on a Pod
// whose server is not up yet). The Engine's helpers then talk to it the way
// both engines' tests need: scrape /metrics, GET, POST, read SSE streams.
package enginetest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpustack/routing-conformance/sim/proc"
)

// Engine is a running engine program.
type Engine struct {
	// URL is "http://127.0.0.1:<port>" (no trailing slash).
	URL    string
	Stdout *Buffer
	Stderr *Buffer

	cancel   context.CancelFunc
	done     chan struct{}
	code     int
	listened chan struct{}
	once     sync.Once
	mu       sync.Mutex
	others   map[string]string // a further port the program asked for -> the port it got
}

// Addr is where a listener the program opened after its serving port (the
// Mooncake bootstrap server, say) is reachable: requested is the port it
// asked for. Empty when it opened none there.
func (e *Engine) Addr(requested int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.others[strconv.Itoa(requested)]
}

// Start runs main with argv and env. It does not wait for the server: use
// WaitReady. The program is stopped (SIGTERM) when the test ends.
func Start(t testing.TB, main proc.Main, args []string, env map[string]string) *Engine {
	t.Helper()
	e, err := StartContext(context.Background(), main, args, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop() })
	return e
}

// StartContext is Start without a testing.TB: the caller must Stop it.
func StartContext(ctx context.Context, main proc.Main, args []string, env map[string]string) (*Engine, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &Engine{
		URL:      "http://127.0.0.1:" + strconv.Itoa(port),
		Stdout:   &Buffer{},
		Stderr:   &Buffer{},
		cancel:   cancel,
		done:     make(chan struct{}),
		listened: make(chan struct{}),
		others:   map[string]string{},
	}
	c := &proc.Container{
		Args:   args,
		Env:    env,
		Stdout: e.Stdout,
		Stderr: e.Stderr,
		Pod:    proc.PodInfo{Name: "engine-0", Namespace: "test", IP: "127.0.0.1"},
		Listen: func(addr string) (net.Listener, error) {
			_, want, _ := net.SplitHostPort(addr)
			serving := want == servePort(args)
			select {
			case <-e.listened:
				serving = false
			default:
			}
			if !serving && (servePort(args) != "" || isClosed(e.listened)) {
				// Not the serving port (or it is bound already): a port of its own.
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err == nil {
					e.mu.Lock()
					e.others[want] = ln.Addr().String()
					e.mu.Unlock()
				}
				return ln, err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				e.once.Do(func() { close(e.listened) })
			}
			return ln, err
		},
	}
	go func() {
		defer close(e.done)
		e.code = main(ctx, c)
	}()
	return e, nil
}

// servePort is the --port argv names ("" when none does): the listener
// asking for it gets the Engine's URL, whatever the program binds first
// (vLLM binds its KV-event sockets before the API server).
func servePort(args []string) string {
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--port="); ok {
			return v
		}
	}
	return ""
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Listening reports whether the program has bound its port.
func (e *Engine) Listening() bool {
	select {
	case <-e.listened:
		return true
	default:
		return false
	}
}

// WaitReady polls GET /health until it answers 200, the program exits, or
// timeout passes.
func (e *Engine) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-e.done:
			return fmt.Errorf("engine exited with code %d before it was ready; stderr:\n%s", e.code, e.Stderr.String())
		default:
		}
		resp, err := client.Get(e.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("engine not ready after %v (last: %v); stderr:\n%s", timeout, err, e.Stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Wait blocks until the program exits (or timeout) and returns its exit code.
func (e *Engine) Wait(timeout time.Duration) (int, error) {
	select {
	case <-e.done:
		return e.code, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("engine still running after %v", timeout)
	}
}

// Stop sends SIGTERM (cancels the context) and waits up to 10s for the exit.
func (e *Engine) Stop() int {
	e.cancel()
	code, _ := e.Wait(10 * time.Second)
	return code
}

// Buffer is a goroutine-safe log buffer (proc.Buffer).
type Buffer = proc.Buffer

// Families are one /metrics scrape, parsed.
type Families map[string]*dto.MetricFamily

// Metrics scrapes GET /metrics and parses it with expfmt.
func (e *Engine) Metrics() (Families, error) {
	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	return Families(fams), err
}

// Value sums the samples of name whose labels include every k=v pair in
// labels. name is a counter or gauge family, or a histogram's
// <family>_count / _sum. ok is false when no series matched.
func (f Families) Value(name string, labels ...string) (v float64, ok bool) {
	family, part := name, ""
	if _, found := f[name]; !found {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, cut := strings.CutSuffix(name, suffix); cut {
				family, part = base, suffix
			}
		}
	}
	mf := f[family]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		ok = true
		switch {
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		case m.GetHistogram() != nil && part == "_count":
			v += float64(m.GetHistogram().GetSampleCount())
		case m.GetHistogram() != nil && part == "_sum":
			v += m.GetHistogram().GetSampleSum()
		case m.GetUntyped() != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// Post sends body as JSON to path and returns the status, headers and body.
// Extra headers come as name, value pairs.
func (e *Engine) Post(path, body string, headers ...string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, e.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}
