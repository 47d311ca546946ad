// Package routertest is what llm-d's emulated programs' tests share: OpenAI
// engine stand-ins on their own loopback addresses that count what they
// serve, and small HTTP and metrics helpers.
package routertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

var ipSeq atomic.Uint32

func init() { ipSeq.Store(uint32(time.Now().UnixNano()%200) * 256) }

// NextIP returns a fresh loopback address (127.90.x.y) for a Pod.
func NextIP() string {
	n := ipSeq.Add(1)
	return fmt.Sprintf("127.90.%d.%d", (n/250)%250+1, n%250+1)
}

// FreePort returns a port free on ip.
func FreePort(t testing.TB, ip string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen %s: %v", ip, err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return p
}

// Engine is an OpenAI-compatible engine stand-in on its own loopback IP.
type Engine struct {
	Name  string
	IP    string
	Port  int
	Model string
	srv   *http.Server
	ln    net.Listener

	healthy atomic.Bool
	// OldServerInfo makes /server_info answer 404 (older SGLang serves only
	// /get_server_info).
	OldServerInfo atomic.Bool
	// FailNext makes the next n generation requests answer FailStatus.
	failNext   atomic.Int64
	failStatus atomic.Int64
	delay      atomic.Int64 // ns before answering a generation request

	mu       sync.Mutex
	counts   map[string]int
	lastHdr  http.Header
	lastBody []byte
	inflight atomic.Int64
	// Release, when set, blocks generation requests until closed.
	release chan struct{}
}

// StartEngine serves on ip:port ("" ip = a fresh one, 0 port = any).
func StartEngine(t testing.TB, name, ip string, port int, model string) *Engine {
	t.Helper()
	if ip == "" {
		ip = NextIP()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("engine %s listen: %v", name, err)
	}
	e := &Engine{Name: name, IP: ip, Port: ln.Addr().(*net.TCPAddr).Port, Model: model, ln: ln, counts: map[string]int{}}
	e.healthy.Store(true)
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.srv.Serve(ln) }()
	t.Cleanup(e.Close)
	return e
}

// Close stops the engine.
func (e *Engine) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
}

// URL is http://ip:port.
func (e *Engine) URL() string { return fmt.Sprintf("http://%s:%d", e.IP, e.Port) }

// SetHealthy makes /health answer 200 or 503.
func (e *Engine) SetHealthy(ok bool) { e.healthy.Store(ok) }

// FailNext makes the next n generation requests answer status.
func (e *Engine) FailNext(n int, status int) {
	e.failStatus.Store(int64(status))
	e.failNext.Store(int64(n))
}

// Hold blocks generation requests until the returned func is called.
func (e *Engine) Hold() (release func()) {
	ch := make(chan struct{})
	e.mu.Lock()
	e.release = ch
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(ch)
			e.mu.Lock()
			e.release = nil
			e.mu.Unlock()
		})
	}
}

// InFlight is the number of generation requests being served.
func (e *Engine) InFlight() int64 { return e.inflight.Load() }

// Count is how many requests the engine answered on path (all methods).
func (e *Engine) Count(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[path]
}

// Generations is the number of generation requests served (chat,
// completions, generate), failures included.
func (e *Engine) Generations() int {
	return e.Count("/v1/chat/completions") + e.Count("/v1/completions") + e.Count("/generate")
}

// LastHeaders and LastBody are the last generation request's.
func (e *Engine) LastHeaders() http.Header {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastHdr.Clone()
}

func (e *Engine) LastBody() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]byte(nil), e.lastBody...)
}

// StreamChunks are the exact SSE bytes a stream answer is made of.
func StreamChunks(worker string) []string {
	return []string{
		`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hel"}}],"worker":"` + worker + "\"}\n\n",
		`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"}}]}` + "\n\n",
		": keep-alive comment\n\n",
		"data: [DONE]\n\n",
	}
}

func (e *Engine) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.counts[r.URL.Path]++
	e.mu.Unlock()
	switch r.URL.Path {
	case "/health":
		if !e.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	case "/v1/models":
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": e.Model, "object": "model", "owned_by": "vllm", "worker": e.Name}}})
		return
	case "/server_info", "/get_server_info":
		if r.URL.Path == "/server_info" && e.OldServerInfo.Load() {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]any{"model_path": e.Model, "served_model_name": e.Model})
		return
	case "/get_load":
		writeJSON(w, map[string]any{"load": e.inflight.Load()})
		return
	case "/v1/chat/completions", "/v1/completions", "/generate":
	default:
		w.Header().Set("X-Worker-Id", e.Name)
		writeJSON(w, map[string]any{"path": r.URL.Path, "method": r.Method, "query": r.URL.RawQuery, "worker": e.Name, "body": string(body)})
		return
	}
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	e.mu.Lock()
	e.lastHdr = r.Header.Clone()
	e.lastBody = body
	rel := e.release
	e.mu.Unlock()
	if rel != nil {
		select {
		case <-rel:
		case <-r.Context().Done():
			return
		}
	}
	if d := e.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	w.Header().Set("X-Worker-Id", e.Name)
	if e.failNext.Load() > 0 && e.failNext.Add(-1) >= 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(e.failStatus.Load()))
		_, _ = io.WriteString(w, `{"error":{"message":"injected failure","worker":"`+e.Name+`"}}`)
		return
	}
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	if s, _ := req["stream"].(bool); s {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("X-Upstream-Only", "1")
		w.WriteHeader(http.StatusOK)
		fl, _ := w.(http.Flusher)
		for _, c := range StreamChunks(e.Name) {
			_, _ = io.WriteString(w, c)
			if fl != nil {
				fl.Flush()
			}
		}
		return
	}
	writeJSON(w, map[string]any{"id": "cmpl-1", "object": "chat.completion", "worker": e.Name, "model": e.Model,
		"choices":            []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "hi"}, "finish_reason": "stop"}},
		"kv_transfer_params": map[string]any{"remote_engine_id": e.Name}})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// Eventually polls cond every 10ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Value is the sum of a family's samples whose labels include want.
func Value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	found := false
	sum := 0.0
	for _, m := range mf.GetMetric() {
		match := true
		for k, v := range want {
			got := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k {
					got = lp.GetValue()
				}
			}
			if got != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.GetSummary().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// Post sends a JSON body and returns status, headers and body.
func Post(t testing.TB, url string, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Get fetches url.
func Get(t testing.TB, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Chat is a one-message chat body.
func Chat(model, content string, stream bool) string {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": content}}, "stream": stream})
	return string(b)
}

// JSONBody decodes a request body written in a test, as the routers' axum
// Json extractor hands it to the routing-text rules.
func JSONBody(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
