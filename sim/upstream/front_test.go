package upstream

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// The front relays a request and its answer as the process's own socket
// would, full duplex: an answer that starts while the request body is
// still arriving streams to its end. (A half-duplex front closed what it
// had not read of the body once the answer started, which failed its
// connection to the router mid-stream: a rare "stream broke after 0
// chunks" when the router answered before the proxy's last body read.)
func TestFrontIsFullDuplex(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		_ = http.Serve(backend, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).EnableFullDuplex()
			// Answer after the first byte of the body, then read the rest.
			if _, err := io.ReadFull(r.Body, make([]byte, 1)); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 0\n\n")
			w.(http.Flusher).Flush()
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "data: read %d more\n\ndata: [DONE]\n\n", n)
		}))
	}()
	host, port, _ := net.SplitHostPort(backend.Addr().String())
	p, _ := strconv.Atoi(port)
	exited := make(chan struct{})
	defer close(exited)
	var frontLn net.Listener
	c := &proc.Container{Stderr: io.Discard, Listen: func(string) (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		frontLn = ln
		return ln, err
	}}
	if front(c, net.JoinHostPort(host, port), p, exited, nil, nil, nil) == nil {
		t.Fatal("the front did not start")
	}

	// The client sends the second half of its body only once the answer
	// has started.
	body, w := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, "http://"+frontLn.Addr().String()+"/v1/chat/completions", body)
	req.ContentLength = 10
	go func() { _, _ = io.WriteString(w, "01234") }()
	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() { resp, err := http.DefaultClient.Do(req); got <- result{resp, err} }()
	var r result
	select {
	case r = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no answer started while the body was still arriving")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	_, _ = io.WriteString(w, "56789")
	_ = w.Close()
	b, err := io.ReadAll(r.resp.Body)
	if err != nil || !strings.HasSuffix(string(b), "data: read 9 more\n\ndata: [DONE]\n\n") {
		t.Fatalf("stream through the front: %q, %v", b, err)
	}
}

// The observer view is the router's own worker list: healthy workers are
// in selection unless their circuit-breaker gauge reads open; a router
// that cannot say is a 503 naming what failed.
func TestObserverViewFromTheRoutersWorkers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/workers", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"workers":[{"url":"http://127.0.3.1:8000","worker_type":"regular","is_healthy":true},`+
			`{"url":"http://127.0.3.2:8000","worker_type":"regular","is_healthy":true},`+
			`{"url":"http://127.0.3.3:8000","worker_type":"regular","is_healthy":false}],"total":3}`)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "# TYPE vllm_router_cb_state gauge\n"+
			"vllm_router_cb_state{worker=\"http://127.0.3.1:8000\"} 0\nvllm_router_cb_state{worker=\"http://127.0.3.2:8000\"} 1\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = http.Serve(ln, mux) }()
	o := newObserver(api.RouterVLLM, ln.Addr().String(), ln.Addr().String(), time.Now())
	doc, err := o.view(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range doc.Workers {
		got = append(got, fmt.Sprintf("%s port=%s healthy=%t open=%t in=%t", w.URL, w.Port, w.Selection.Healthy, w.Selection.CircuitOpen, w.Selection.InSelection))
	}
	want := []string{
		"http://127.0.3.1:8000 port=8000 healthy=true open=false in=true",
		"http://127.0.3.2:8000 port=8000 healthy=true open=true in=false",
		"http://127.0.3.3:8000 port=8000 healthy=false open=false in=false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("view:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	gone := newObserver(api.RouterVLLM, "127.0.0.1:1", "", time.Now())
	rec := httptest.NewRecorder()
	gone.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/observer/endpoints", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "/workers") {
		t.Errorf("an unreachable router: %d %q", rec.Code, rec.Body.String())
	}
}
