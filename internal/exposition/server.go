package exposition

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is a loopback /metrics endpoint whose page a test changes between
// scrapes, the way a live process's counters move.
type Server struct {
	URL string // the /metrics URL

	mu   sync.Mutex
	body string
}

// Serve starts a Server with a first page; it stops when the test ends.
func Serve(t testing.TB, body string) *Server {
	t.Helper()
	s := &Server{body: body}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/metrics"
	return s
}

// Set replaces the page served from now on.
func (s *Server) Set(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

func (s *Server) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(s.body))
}
