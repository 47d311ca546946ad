package service

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/sim/kubelet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const targetPort = 18081

// backend is an HTTP server on its own loopback address and targetPort
// answering its name.
func backend(t *testing.T, name string) (Endpoint, *http.Server) {
	t.Helper()
	ip, err := kubelet.AllocateAddress([]int{targetPort})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(targetPort)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name)
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		kubelet.ReleaseAddress(ip)
	})
	return Endpoint{Name: name, IP: ip, Ready: true, Serving: true}, srv
}

func newService(t *testing.T) *Service {
	t.Helper()
	ip, err := kubelet.AllocateAddress([]int{8081})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen("md-router", ip, 8081, targetPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		kubelet.ReleaseAddress(ip)
	})
	return s
}

// get sends one request on a fresh connection and returns the body.
func get(s *Service) (string, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + s.Addr() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestNewConnectionsSpreadAtRandomOverReadyEndpoints(t *testing.T) {
	s := newService(t)
	a, _ := backend(t, "a")
	b, _ := backend(t, "b")
	c, _ := backend(t, "c")
	c.Ready = false // not Ready: never picked
	d, _ := backend(t, "d")
	d.Ready, d.Terminating = false, true // terminating: not while a Ready one exists
	s.SetEndpoints([]Endpoint{a, b, c, d})

	const n = 400
	got := map[string]int{}
	for range n {
		body, err := get(s)
		if err != nil {
			t.Fatal(err)
		}
		got[body]++
	}
	// Binomial(400, 1/2): sd 10; 5 sd either side fails once in ~1.7 million runs.
	if got["a"]+got["b"] != n || got["a"] < 150 || got["b"] < 150 {
		t.Fatalf("connections per endpoint %v; want a and b only, each 200±50", got)
	}
	if conns := s.Connections(); conns["a"] != got["a"] || conns["b"] != got["b"] {
		t.Errorf("Connections() %v, measured %v", conns, got)
	}
}

func TestTerminatingEndpointsServeOnlyWhenNoneIsReady(t *testing.T) {
	s := newService(t)
	old, _ := backend(t, "old")
	old.Ready, old.Terminating = false, true
	s.SetEndpoints([]Endpoint{old})
	if body, err := get(s); err != nil || body != "old" {
		t.Fatalf("with only a serving terminating endpoint: %q %v", body, err)
	}
	old.Serving = false
	s.SetEndpoints([]Endpoint{old})
	if body, err := get(s); err == nil {
		t.Fatalf("with no usable endpoint a connection reached %q", body)
	}
	if len(s.Usable()) != 0 {
		t.Errorf("usable %v", s.Usable())
	}
	s.SetEndpoints(nil)
	if _, err := get(s); err == nil {
		t.Fatal("a Service without endpoints accepted a request")
	}
}

func TestAConnectionKeepsItsEndpointAfterTheListChanges(t *testing.T) {
	s := newService(t)
	a, _ := backend(t, "a")
	b, _ := backend(t, "b")
	s.SetEndpoints([]Endpoint{a})
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	read := func() string {
		resp, err := client.Get("http://" + s.Addr() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if got := read(); got != "a" {
		t.Fatalf("first: %q", got)
	}
	// a leaves the list (a rollout): the kept-alive connection stays on a,
	// as conntrack keeps it; a new connection goes to b.
	s.SetEndpoints([]Endpoint{b})
	if got := read(); got != "a" {
		t.Fatalf("kept-alive connection moved to %q", got)
	}
	if got, err := get(s); err != nil || got != "b" {
		t.Fatalf("new connection: %q %v", got, err)
	}
}

func TestAnEndpointThatClosesEndsTheConnectionThroughTheService(t *testing.T) {
	s := newService(t)
	a, srv := backend(t, "a")
	s.SetEndpoints([]Endpoint{a})
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := conn.Read(buf); err != nil {
		t.Fatal(err)
	}
	// The Pod goes away: the client's connection ends too.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("connection not ended by the endpoint: %v", err)
	}
}
