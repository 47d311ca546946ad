// Package llmdtest holds the llm-d packages' test fixtures: loopback fake
// engines with a settable metrics table, a fake Pod source, and containers
// for the epp and envoy programs. It is imported by tests and benchmarks
// only.
package llmdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// Engine is a fake OpenAI engine on <ip>:<port> whose /metrics serves the
// gauges set with Set.
type Engine struct {
	IP   string
	Port int
	Name string

	srv      *http.Server
	mu       sync.Mutex
	gauges   map[string]float64
	Requests atomic.Int64
	// LastHeaders and LastBody are the last chat request's.
	lastHeaders http.Header
	lastBody    []byte
	// Down makes /metrics answer 500 when set.
	Down atomic.Bool
	// Hold, when set, blocks chat requests until closed.
	Hold chan struct{}
}

// StartEngine listens on ip:port (port 0 picks one).
func StartEngine(t testing.TB, name, ip string, port int) *Engine {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("engine %s: %v", name, err)
	}
	e := &Engine{IP: ip, Port: ln.Addr().(*net.TCPAddr).Port, Name: name, gauges: map[string]float64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", e.metrics)
	mux.HandleFunc("/v1/chat/completions", e.chat)
	mux.HandleFunc("/v1/completions", e.chat)
	mux.HandleFunc("/v1/chat/completions/render", e.render)
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	})
	e.srv = &http.Server{Handler: mux}
	go e.srv.Serve(ln)
	t.Cleanup(func() { e.srv.Close() })
	return e
}

// Addr is ip:port.
func (e *Engine) Addr() string { return net.JoinHostPort(e.IP, strconv.Itoa(e.Port)) }

// Set sets a gauge family (one unlabelled series) on /metrics.
func (e *Engine) Set(name string, v float64) {
	e.mu.Lock()
	e.gauges[name] = v
	e.mu.Unlock()
}

// Last returns the last chat request's headers and body.
func (e *Engine) Last() (http.Header, []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastHeaders, e.lastBody
}

func (e *Engine) metrics(w http.ResponseWriter, _ *http.Request) {
	if e.Down.Load() {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for k, v := range e.gauges {
		name, labels, _ := strings.Cut(k, "{")
		if labels != "" {
			labels = "{" + labels
		}
		fmt.Fprintf(&b, "# TYPE %s gauge\n%s%s %g\n", name, name, labels, v)
	}
	io.WriteString(w, b.String())
}

func (e *Engine) chat(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.Requests.Add(1)
	e.mu.Lock()
	e.lastHeaders, e.lastBody = r.Header.Clone(), body
	e.mu.Unlock()
	if e.Hold != nil {
		select {
		case <-e.Hold:
		case <-r.Context().Done():
			return
		}
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i, tok := range []string{"Hel", "lo"} {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", req.Model, tok)
			fl.Flush()
			_ = i
		}
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9}}\n\n", req.Model)
		io.WriteString(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":%q,"served_by":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}`, req.Model, e.Name)
}

// render answers vLLM's /v1/chat/completions/render with one token per
// byte of the joined message contents (a stand-in tokenizer).
func (e *Engine) render(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ids := []uint32{}
	for _, m := range req.Messages {
		for _, c := range []byte(m.Content) {
			ids = append(ids, uint32(c))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"token_ids": ids})
}

// Pods is a fake Pod source.
type Pods struct {
	mu   sync.Mutex
	pods map[string]datalayer.Pod
	subs []chan struct{}
}

// NewPods returns an empty source.
func NewPods() *Pods { return &Pods{pods: map[string]datalayer.Pod{}} }

// Put adds or replaces a Pod and notifies watchers.
func (p *Pods) Put(pod datalayer.Pod) {
	p.change(func() { p.pods[pod.Namespace+"/"+pod.Name] = pod })
}

// Delete removes a Pod and notifies watchers.
func (p *Pods) Delete(ns, name string) {
	p.change(func() { delete(p.pods, ns+"/"+name) })
}

// change applies f under the lock, then wakes every watcher without blocking.
func (p *Pods) change(f func()) {
	p.mu.Lock()
	f()
	subs := append([]chan struct{}(nil), p.subs...)
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s <- struct{}{}:
		default:
		}
	}
}

// Pods implements datalayer.PodSource.
func (p *Pods) Pods(ns string) []datalayer.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []datalayer.Pod
	for _, pod := range p.pods {
		if pod.Namespace == ns {
			out = append(out, pod)
		}
	}
	return out
}

// Watch implements datalayer.PodSource.
func (p *Pods) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.subs = append(p.subs, ch)
	p.mu.Unlock()
	return ch, func() {}
}

// EnginePod is a Ready engine Pod with the labels the operator renders for
// a role kind.
func EnginePod(name, ns, ip, md, kind string) datalayer.Pod {
	return datalayer.Pod{Name: name, Namespace: ns, IP: ip, Ready: true, Labels: map[string]string{
		"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": md,
		"app.kubernetes.io/component": kind, "modeldeployment.gpustack.ai/role-kind": kind,
		"modeldeployment.gpustack.ai/member-index": "0",
	}}
}

// Selector is the operator's llm-d endpoint selector for deployment md.
func Selector(md string) string {
	return "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=" + md +
		",modeldeployment.gpustack.ai/member-index=0,!modeldeployment.gpustack.ai/router"
}

// Container builds a container on ip with the given argv and env.
func Container(ip, pod string, args []string, env map[string]string) (*proc.Container, *proc.Buffer, *proc.Buffer) {
	out, errw := &proc.Buffer{}, &proc.Buffer{}
	c := &proc.Container{Args: args, Env: env, Stdout: out, Stderr: errw,
		Pod: proc.PodInfo{Name: pod, Namespace: "team-a", IP: ip},
		Listen: func(addr string) (net.Listener, error) {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return net.Listen("tcp", net.JoinHostPort(ip, port))
		}}
	return c, out, errw
}

// Files is a mounted-volume file system ("config/epp.yaml" for /config/epp.yaml).
func Files(files map[string]string) fs.FS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[strings.TrimPrefix(k, "/")] = &fstest.MapFile{Data: []byte(v)}
	}
	return m
}

// FreePort returns a port free on every given IP.
func FreePort(t testing.TB, ips ...string) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ok := true
		var held []net.Listener
		for _, ip := range ips[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
		}
		ln.Close()
		for _, l := range held {
			l.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatal("no common free port")
	return 0
}

// Running is a started program.
type Running struct {
	cancel context.CancelFunc
	done   chan int
	once   sync.Once
	code   int
}

// Run starts main on c.
func Run(main proc.Main, c *proc.Container) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan int, 1)}
	go func() { r.done <- main(ctx, c) }()
	return r
}

// Wait returns the exit code if the program ends within d.
func (r *Running) Wait(d time.Duration) (int, bool) {
	select {
	case code := <-r.done:
		r.once.Do(func() { r.code = code })
		return code, true
	case <-time.After(d):
		return 0, false
	}
}

// Stop cancels the program (SIGTERM) and returns its exit code.
func (r *Running) Stop() int {
	r.cancel()
	r.once.Do(func() { r.code = <-r.done })
	return r.code
}
