package traffic

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The tests of this file are about connection handling: what the run's
// net/http Transport must do for the driver's numbers to mean something.

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

// A server that closes every connection, and a plan that asks for a new
// connection per request, both give one connection per request.
func TestOneConnectionPerRequest(t *testing.T) {
	for name, c := range map[string]struct {
		server func(*http.Server)
		plan   func(*Plan)
	}{
		"connection-close answers are not reused": {
			server: func(s *http.Server) { s.SetKeepAlivesEnabled(false) },
			plan:   func(p *Plan) { p.Mode = ModeAlternate },
		},
		"NewConnectionPerRequest dials for every request": {
			plan: func(p *Plan) { p.NewConnectionPerRequest = true },
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, conns := countingServer(t, c.server, nil)
			p := plan(srv.URL, 6)
			c.plan(&p)
			for _, r := range mustRun(t, p).Results {
				wantClass(t, r, ClassOK)
			}
			if got := conns.Load(); got != int32(p.Requests) {
				t.Errorf("server accepted %d connections for %d requests, want one each", got, p.Requests)
			}
		})
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

// A worker's connection is back in the pool before its request returns
// (the doer reads every body to its end, and net/http pools a connection
// before a body read returns io.EOF), so a serial run needs one connection.
//
// With several workers net/http may dial more connections than workers: a
// request that finds no idle connection dials, and when another connection
// frees up first it takes that one and the finished dial joins the pool.
// TestTransportPoolsAnIdleConnectionPerWorker checks the pool's size instead.
func TestSerialRunKeepsOneConnectionAlive(t *testing.T) {
	srv, conns := countingServer(t, nil, nil)
	p := plan(srv.URL, 20)
	p.Mode = ModeAlternate
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassOK)
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("a serial run used %d connections, want 1 kept alive", got)
	}
}

// With net/http's default of 2 idle connections per host, 64 workers
// redial constantly: in bench/driver-vs-peer.sh that halved throughput and
// left ~10k sockets in TIME_WAIT.
func TestTransportPoolsAnIdleConnectionPerWorker(t *testing.T) {
	for _, c := range []int{1, 64, 500} {
		tr := newHTTPTransport(c)
		if tr.MaxIdleConnsPerHost < c || tr.MaxIdleConns < c {
			t.Errorf("concurrency %d: idle pool %d per host, %d in all; want >= %d", c, tr.MaxIdleConnsPerHost, tr.MaxIdleConns, c)
		}
		if tr.MaxConnsPerHost != 0 && tr.MaxConnsPerHost < c {
			t.Errorf("concurrency %d: MaxConnsPerHost %d would queue workers", c, tr.MaxConnsPerHost)
		}
		if !tr.DisableCompression || tr.IdleConnTimeout <= 0 {
			t.Errorf("concurrency %d: DisableCompression %v, IdleConnTimeout %v", c, tr.DisableCompression, tr.IdleConnTimeout)
		}
		// Proxies come from HTTPS_PROXY/HTTP_PROXY/NO_PROXY, as for any Go client.
		if tr.Proxy == nil || reflect.ValueOf(tr.Proxy).Pointer() != reflect.ValueOf(http.ProxyFromEnvironment).Pointer() {
			t.Errorf("concurrency %d: Proxy is not http.ProxyFromEnvironment", c)
		}
	}
}

// A router does not redirect; a 3xx is recorded as the answer, not followed
// (which would replay the POST as a GET elsewhere).
func TestRedirectIsRecordedNotFollowed(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) {
		http.Redirect(w, r, "/v1/elsewhere", http.StatusTemporaryRedirect)
	})
	p := plan(srv.URL, 2)
	p.Mode = ModeAlternate
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassHTTPOther)
		if r.Status != http.StatusTemporaryRedirect {
			t.Errorf("request %d: status %d, want 307", r.Index, r.Status)
		}
	}
	for _, req := range f.seen() {
		if req.Path != "/v1/chat/completions" {
			t.Errorf("the redirect was followed to %s", req.Path)
		}
	}
}

// Engines answer uncompressed and a compressing proxy would hold SSE events
// back, so the driver asks for no compression (net/http asks for gzip by
// default).
func TestNoCompressionIsAskedFor(t *testing.T) {
	var f fakeOpenAI
	srv := f.start(t, func(w http.ResponseWriter, r *http.Request, req seenRequest) { answerOK(w, req) })
	p := plan(srv.URL, 2)
	p.Mode = ModeAlternate
	for _, r := range mustRun(t, p).Results {
		wantClass(t, r, ClassOK)
	}
	for _, req := range f.seen() {
		if got := req.Header.Get("Accept-Encoding"); got != "" {
			t.Errorf("request %d: Accept-Encoding %q, want none", req.Index, got)
		}
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
