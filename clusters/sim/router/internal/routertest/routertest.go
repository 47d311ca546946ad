// Package routertest runs the router emulators for real on loopback in
// tests: OpenAI engine stand-ins that count what they serve, an in-memory
// Pod watcher, and a runner that starts a router Main as the sim's kubelet
// would and scrapes its metrics.
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
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/tracing"
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

// Pods is an in-memory proc.PodWatcher.
type Pods struct {
	mu   sync.Mutex
	pods map[string]proc.Pod
	subs map[int]chan struct{}
	next int
}

// NewPods returns an empty watcher.
func NewPods() *Pods { return &Pods{pods: map[string]proc.Pod{}, subs: map[int]chan struct{}{}} }

// List implements proc.PodWatcher.
func (p *Pods) List(namespace string, selector map[string]string) []proc.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []proc.Pod
	for _, pod := range p.pods {
		if namespace != "" && pod.Namespace != namespace {
			continue
		}
		ok := true
		for k, v := range selector {
			if pod.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, pod)
		}
	}
	// Stable order: by name.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Watch implements proc.PodWatcher.
func (p *Pods) Watch() (<-chan struct{}, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{}, 1)
	id := p.next
	p.next++
	p.subs[id] = ch
	return ch, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.subs, id)
	}
}

// Put adds or replaces a Pod and notifies watchers.
func (p *Pods) Put(pod proc.Pod) {
	p.mu.Lock()
	if pod.UID == "" {
		pod.UID = pod.Namespace + "/" + pod.Name
	}
	p.pods[pod.Namespace+"/"+pod.Name] = pod
	p.notifyLocked()
	p.mu.Unlock()
}

// Update changes a Pod in place.
func (p *Pods) Update(namespace, name string, f func(*proc.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := namespace + "/" + name
	pod, ok := p.pods[key]
	if !ok {
		return
	}
	f(&pod)
	p.pods[key] = pod
	p.notifyLocked()
}

// Delete removes a Pod.
func (p *Pods) Delete(namespace, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, namespace+"/"+name)
	p.notifyLocked()
}

func (p *Pods) notifyLocked() {
	for _, ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// EnginePod is a Running, Ready Pod for e with labels.
func EnginePod(namespace, name string, e *Engine, labels map[string]string) proc.Pod {
	return proc.Pod{PodInfo: proc.PodInfo{Name: name, Namespace: namespace, UID: namespace + "/" + name + "-uid", IP: e.IP, Labels: labels},
		Phase: "Running", Ready: true}
}

// Namespace is the namespace of the tests' engine Pods and of the
// operator's --service-discovery-namespace.
const Namespace = "ns"

// Selector is the operator's --selector for ModelDeployment "md" (a fresh
// map each call, so a test can use it as Pod labels).
func Selector() map[string]string { return map[string]string{"app.kubernetes.io/instance": "md"} }

// OperatorArgs is the argv gpustack-operator renders for both argv routers
// (docs/operator.md#router-argv), with the router ports left to Start.
func OperatorArgs(enginePort int, extra ...string) []string {
	a := []string{"--host=0.0.0.0", "--port={PORT}", "--prometheus-host=0.0.0.0", "--prometheus-port={PROM}",
		"--service-discovery", "--service-discovery-namespace=" + Namespace, "--service-discovery-port=" + strconv.Itoa(enginePort),
		"--selector", "app.kubernetes.io/instance=md"}
	return append(a, extra...)
}

// Fleet starts n engines (w0, w1, …) on one port, each on its own loopback
// IP, with Pods md-server-<i> in pods (when not nil) matching Selector.
func Fleet(t testing.TB, n int, pods *Pods) []*Engine {
	t.Helper()
	var es []*Engine
	port := 0
	for i := 0; i < n; i++ {
		e := StartEngine(t, fmt.Sprintf("w%d", i), "", port, "m")
		port = e.Port
		es = append(es, e)
		if pods != nil {
			pods.Put(EnginePod(Namespace, fmt.Sprintf("md-server-%d", i), e, Selector()))
		}
	}
	return es
}

// PDFleet starts nPre prefill engines (p0, p1, …) and nDec decode engines
// (d0, d1, …) on one port, with Pods md-prefill-<i> and md-decode-<i>
// labelled as PDArgs selects them; prefill Pods carry bootstrapAnnotation
// (the router's bootstrap-port annotation) set to 8998 when it is not "".
func PDFleet(t testing.TB, nPre, nDec int, pods *Pods, bootstrapAnnotation string) (pre, dec []*Engine) {
	t.Helper()
	port := 0
	for _, pool := range []struct {
		kind string
		n    int
		out  *[]*Engine
	}{{"prefill", nPre, &pre}, {"decode", nDec, &dec}} {
		for i := 0; i < pool.n; i++ {
			e := StartEngine(t, fmt.Sprintf("%c%d", pool.kind[0], i), "", port, "m")
			port = e.Port
			*pool.out = append(*pool.out, e)
			pod := EnginePod(Namespace, fmt.Sprintf("md-%s-%d", pool.kind, i), e, map[string]string{"app.kubernetes.io/instance": "md", "kind": pool.kind})
			if pool.kind == "prefill" && bootstrapAnnotation != "" {
				pod.Annotations = map[string]string{bootstrapAnnotation: "8998"}
			}
			pods.Put(pod)
		}
	}
	return pre, dec
}

// PDArgs is the argv the operator renders for a prefill/decode pair
// (docs/operator.md#router-argv): pdFlag (--vllm-pd-disaggregation or
// --pd-disaggregation) and a selector per pool, as PDFleet labels them.
func PDArgs(enginePort int, pdFlag string, extra ...string) []string {
	a := []string{"--host=0.0.0.0", "--port={PORT}", "--prometheus-host=0.0.0.0", "--prometheus-port={PROM}",
		"--service-discovery", "--service-discovery-namespace=" + Namespace, "--service-discovery-port=" + strconv.Itoa(enginePort),
		pdFlag, "--prefill-selector", "app.kubernetes.io/instance=md", "kind=prefill",
		"--decode-selector", "app.kubernetes.io/instance=md", "kind=decode"}
	return append(a, extra...)
}

// StartOverFleet runs main with OperatorArgs over es (their Pods in pods)
// and env, and waits until it is live and registered(r) counts every
// engine (each router lists its workers its own way).
func StartOverFleet(t testing.TB, main Main, es []*Engine, pods *Pods, env map[string]string, registered func(*Router) int, extra ...string) *Router {
	t.Helper()
	r := Start(t, main, OperatorArgs(es[0].Port, extra...), env, pods)
	r.WaitReady(t, "/liveness", 5*time.Second)
	Eventually(t, 5*time.Second, func() bool { return registered(r) == len(es) }, "workers never registered; stdout:\n%s", r.Stdout)
	return r
}

// Buffer is a goroutine-safe log buffer (proc.Buffer).
type Buffer = proc.Buffer

// Router is a running router program.
type Router struct {
	IP       string
	Port     int
	PromPort int
	Stdout   *Buffer
	Stderr   *Buffer
	cancel   context.CancelFunc
	done     chan int
	code     int
	exited   bool
}

// Main matches proc.Main.
type Main = proc.Main

// Start runs main with args (argv after the binary) as a container with
// its own loopback IP; {PORT} and {PROM} in args are replaced by the chosen
// ports.
func Start(t testing.TB, main Main, args []string, env map[string]string, pods proc.PodWatcher) *Router {
	t.Helper()
	ip := NextIP()
	r := &Router{IP: ip, Port: FreePort(t, ip), PromPort: FreePort(t, ip), Stdout: &Buffer{}, Stderr: &Buffer{}, done: make(chan int, 1)}
	for i, a := range args {
		a = strings.ReplaceAll(a, "{PORT}", strconv.Itoa(r.Port))
		args[i] = strings.ReplaceAll(a, "{PROM}", strconv.Itoa(r.PromPort))
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	c := &proc.Container{
		Args:   args,
		Env:    env,
		Stdout: r.Stdout,
		Stderr: r.Stderr,
		Pod:    proc.PodInfo{Name: "router-0", Namespace: "ns", IP: ip},
		Listen: func(addr string) (net.Listener, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if host == "" || host == "0.0.0.0" || host == "127.0.0.1" || host == ip {
				host = ip
			}
			return net.Listen("tcp", net.JoinHostPort(host, port))
		},
		Pods: pods,
	}
	go func() { r.done <- main(ctx, c) }()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Base is the router's serving URL.
func (r *Router) Base() string { return fmt.Sprintf("http://%s:%d", r.IP, r.Port) }

// Logs is the router's stdout without ANSI colour.
func (r *Router) Logs() string { return tracing.Strip(r.Stdout.String()) }

// MetricsURL is the exporter's URL.
func (r *Router) MetricsURL() string { return fmt.Sprintf("http://%s:%d/metrics", r.IP, r.PromPort) }

// Wait waits for the program to exit on its own and returns its code.
func (r *Router) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	if r.exited {
		return r.code
	}
	select {
	case r.code = <-r.done:
		r.exited = true
		return r.code
	case <-time.After(timeout):
		t.Fatalf("router did not exit within %v; stderr:\n%s", timeout, r.Stderr.String())
		return -1
	}
}

// Stop cancels the program (SIGTERM) and returns its exit code.
func (r *Router) Stop(t testing.TB) int {
	t.Helper()
	r.cancel()
	return r.Wait(t, 20*time.Second)
}

// WaitReady polls until GET path answers 200 and cond (if any) holds.
func (r *Router) WaitReady(t testing.TB, path string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() bool {
		resp, err := http.Get(r.Base() + path)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "router %s never answered 200 on %s; stdout:\n%s\nstderr:\n%s", r.Base(), path, r.Stdout, r.Stderr)
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

// Metrics scrapes the router's exporter.
func (r *Router) Metrics(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(r.MetricsURL())
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return mfs
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
