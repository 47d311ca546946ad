package traffic

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests of this file are about connection handling, which differs
// between h1Transport and net/http's Transport; TestMain runs every test of
// the package through both.

// countingServer answers like vLLM and counts the connections it accepted.
func countingServer(t *testing.T, configure func(*http.Server), handle func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	if handle == nil {
		handle = func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			req := seenRequest{Path: r.URL.Path, Body: map[string]any{}}
			if strings.Contains(string(body), `"stream":true`) {
				req.Body["stream"] = true
			}
			answerOK(w, req)
		}
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(handle))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestIdleConnectionTheServerClosedIsNotReused(t *testing.T) {
	srv, conns := countingServer(t, func(s *http.Server) {
		s.IdleTimeout = time.Millisecond // uvicorn's keep-alive timeout, only shorter
	}, nil)
	p := plan(srv.URL, 6)
	p.Mode = ModeAlternate
	p.RPS = 20 // 50ms apart: every request finds its idle connection closed
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassOK)
	}
	if got := conns.Load(); got != int32(p.Requests) {
		t.Errorf("server accepted %d connections for %d requests, want one each", got, p.Requests)
	}
}

func TestConnectionCloseAnswersAreNotReused(t *testing.T) {
	srv, conns := countingServer(t, func(s *http.Server) { s.SetKeepAlivesEnabled(false) }, nil)
	p := plan(srv.URL, 4)
	p.Mode = ModeAlternate
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassOK)
	}
	if got := conns.Load(); got != int32(p.Requests) {
		t.Errorf("server accepted %d connections for %d requests, want one each", got, p.Requests)
	}
}

func TestInterim1xxAnswersAreSkipped(t *testing.T) {
	srv, _ := countingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Link", "</hint>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		answerOK(w, seenRequest{Path: r.URL.Path})
	})
	for _, r := range mustRun(t, plan(srv.URL, 2)).Results {
		wantClass(t, r, ClassOK)
		if r.Status != http.StatusOK {
			t.Errorf("status %d, want 200", r.Status)
		}
	}
}

// go-openai reads the body of a failed stream request but never closes it:
// the connection must still go back to the pool once the body has ended.
func TestFailedStreamRequestsKeepTheirConnection(t *testing.T) {
	srv, conns := countingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"no workers","type":"ServiceUnavailableError","code":503}}`)
	})
	p := plan(srv.URL, 4)
	p.Mode = ModeStream
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassHTTP5xx)
		if r.ErrorMessage != "no workers" {
			t.Errorf("error message %q", r.ErrorMessage)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("a serial run used %d connections, want 1 kept alive", got)
	}
}

// h1Transport gives a connection back before the request returns, so a run
// never holds more connections than workers.
func TestH1RunUsesAtMostOneConnectionPerWorker(t *testing.T) {
	if !h1Supported {
		t.Skip("h1Transport is not used on this OS")
	}
	srv, conns := countingServer(t, nil, nil)
	p := plan(srv.URL, 80)
	p.Concurrency = 4
	p.Mode = ModeAlternate
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rep, err := run(ctx, p, runOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.OK != p.Requests {
		t.Fatalf("ok %d of %d: %v", rep.Summary.OK, p.Requests, rep.Summary.ByClass)
	}
	if got := conns.Load(); got > int32(p.Concurrency) {
		t.Errorf("%d connections for %d workers", got, p.Concurrency)
	}
}

func TestPlainHTTPWithoutProxyUsesH1Transport(t *testing.T) {
	for _, tc := range []struct {
		base     string
		netHTTP  bool
		wantH1   bool
		wantAddr string
	}{
		{"http://127.0.0.1:8081/v1", false, h1Supported, "127.0.0.1:8081"},
		{"http://router.example/v1", false, h1Supported, "router.example:80"},
		{"http://[::1]:9/v1", false, h1Supported, "[::1]:9"},
		{"https://127.0.0.1:8443/v1", false, false, ""},
		{"http://127.0.0.1:8081/v1", true, false, ""},
	} {
		rt := newHTTPTransport(tc.base, 4, tc.netHTTP)
		h1, isH1 := rt.(*h1Transport)
		if isH1 != tc.wantH1 {
			t.Errorf("%s (netHTTP %v): transport %T", tc.base, tc.netHTTP, rt)
			continue
		}
		if isH1 && h1.addr != tc.wantAddr {
			t.Errorf("%s: dials %q, want %q", tc.base, h1.addr, tc.wantAddr)
		}
	}
}

func TestIdleConnAliveTellsAClosedOrDirtyConnection(t *testing.T) {
	if !h1Supported {
		t.Skip("no probe on this OS")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var peers []net.Conn
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			peers = append(peers, c)
			mu.Unlock()
			accepted <- c
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range peers {
			_ = c.Close()
		}
	}()
	dial := func() (net.Conn, net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, <-accepted
	}
	eventually := func(what string, want bool, c net.Conn) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for newConnProbe(c).idleConnAlive() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: idleConnAlive stayed %v", what, !want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	quiet, _ := dial()
	if !newConnProbe(quiet).idleConnAlive() {
		t.Error("a quiet open connection is not alive")
	}
	closed, peer := dial()
	_ = peer.Close()
	eventually("peer closed", false, closed)
	dirty, peer := dial()
	_, _ = peer.Write([]byte("HTTP/1.1 200 OK\r\n"))
	eventually("unexpected bytes", false, dirty)
	// the probe only peeks: the bytes are still there
	buf := make([]byte, 4)
	if _, err := io.ReadFull(dirty, buf); err != nil || string(buf) != "HTTP" {
		t.Errorf("read %q, %v after the probe", buf, err)
	}
}

// Canceling the run ends exchanges blocked anywhere: waiting for the answer's
// header, or in the middle of a stream's body.
func TestCancelEndsStalledHeadersAndStalledStreams(t *testing.T) {
	const c = 4
	var f fakeOpenAI
	var streaming atomic.Int32
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		if isStream(req) {
			startSSE(w)
			sse(w, chunk(req, "hel", ""))
			streaming.Add(1)
		}
		<-r.Context().Done()
	})
	p := plan(srv.URL, c)
	p.Concurrency = c
	p.Mode = ModeAlternate
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan *Report, 1)
	go func() {
		rep, _ := Run(ctx, p)
		done <- rep
	}()
	deadline := time.Now().Add(10 * time.Second)
	for f.inFlight() < c || streaming.Load() < c/2 {
		if time.Now().After(deadline) {
			t.Fatalf("server never had %d requests in flight", c)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case rep := <-done:
		for _, r := range rep.Results {
			wantClass(t, r, ClassCanceled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancellation")
	}
}
