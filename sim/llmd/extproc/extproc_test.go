package extproc_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
)

// proc records what the server side saw; buffered holds the response body
// until its end, as the EPP does for a non-streaming response.
type proc struct {
	mu        sync.Mutex
	headers   map[string]string
	body      []byte
	status    int
	closed    int
	buffered  bool
	buf       []byte
	immediate *extproc.Immediate
	fail      bool
}

func (p *proc) Open(context.Context) extproc.Stream { return p }
func (p *proc) Request(h map[string]string, b []byte) (extproc.RequestReply, error) {
	p.mu.Lock()
	p.headers, p.body = h, b
	p.mu.Unlock()
	switch {
	case p.fail:
		return extproc.RequestReply{}, errors.New("failed to handle request")
	case p.immediate != nil:
		return extproc.RequestReply{Immediate: p.immediate}, nil
	}
	out := b
	if b != nil {
		out = append([]byte("rewritten:"), b...)
	}
	return extproc.RequestReply{SetHeaders: map[string]string{extproc.DestinationKey: "10.0.0.7:8000"}, Body: out, Destination: "10.0.0.7:8000"}, nil
}
func (p *proc) ResponseHeaders(code int, _ map[string]string) (map[string]string, error) {
	p.mu.Lock()
	p.status = code
	p.mu.Unlock()
	return map[string]string{"x-went-into-resp-headers": "true"}, nil
}
func (p *proc) ResponseBody(b []byte, eos bool) ([]byte, error) {
	if !p.buffered {
		return b, nil
	}
	p.buf = append(p.buf, b...)
	if !eos {
		return nil, nil
	}
	return p.buf, nil
}
func (p *proc) Close() {
	p.mu.Lock()
	p.closed++
	p.mu.Unlock()
}

func serve(t *testing.T, addr string, p extproc.Processor) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := extproc.Serve(ln, p)
	t.Cleanup(s.Stop)
}

func client(t *testing.T, addr string) *extproc.Client {
	t.Helper()
	c, err := extproc.NewClient(addr, "localhost:9002", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestNothingListeningIsUnavailableUntilTheEPPServes(t *testing.T) {
	addr := "127.0.6.1:9002"
	c := client(t, addr)
	if _, err := c.Open(context.Background()); status.Code(err) != codes.Unavailable {
		t.Fatalf("a refused connection is gRPC status 14: %v", err)
	}
	serve(t, addr, &proc{})
	// The next request connects again at once (no reconnect backoff).
	start := time.Now()
	s, err := c.Open(context.Background())
	if err != nil {
		t.Fatalf("once the EPP listens: %v", err)
	}
	defer s.Close()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("connecting took %v", d)
	}
}

func TestRequestPhaseCarriesThePickInHeaderAndMetadata(t *testing.T) {
	addr := "127.0.6.2:9002"
	p := &proc{}
	serve(t, addr, p)
	s, err := client(t, addr).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 150_000) // spans three 62000-byte messages each way
	reply, err := s.Request(map[string]string{":method": "POST", ":path": "/v1/completions", "x-request-id": "r1"}, body)
	if err != nil {
		t.Fatal(err)
	}
	if reply.SetHeaders[extproc.DestinationKey] != "10.0.0.7:8000" || reply.Destination != "10.0.0.7:8000" {
		t.Fatalf("pick: %+v", reply.SetHeaders)
	}
	if string(reply.Body) != "rewritten:"+string(body) {
		t.Fatalf("body comes back whole: %d bytes", len(reply.Body))
	}
	p.mu.Lock()
	if p.headers[":path"] != "/v1/completions" || p.headers["x-request-id"] != "r1" || !bytes.Equal(p.body, body) {
		t.Fatalf("server saw %v and %d bytes", p.headers, len(p.body))
	}
	p.mu.Unlock()

	set, err := s.ResponseHeaders(200, map[string]string{"content-type": "application/json"})
	if err != nil || set["x-went-into-resp-headers"] != "true" {
		t.Fatalf("%v %v", set, err)
	}
	p.mu.Lock()
	if p.status != 200 {
		t.Fatalf("status %d", p.status)
	}
	p.mu.Unlock()
	for _, c := range []string{"a", "b"} {
		if err := s.SendResponseBody([]byte(c), c == "b"); err != nil {
			t.Fatal(err)
		}
		got, eos, err := s.RecvResponseBody()
		if err != nil || string(got) != c || eos != (c == "b") {
			t.Fatalf("streamed chunk %q: %q %v %v", c, got, eos, err)
		}
	}
	s.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closing the client stream closes the server's")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBufferedResponseComesBackAtEndOfStream(t *testing.T) {
	addr := "127.0.6.3:9002"
	serve(t, addr, &proc{buffered: true})
	s, err := client(t, addr).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Request(map[string]string{":method": "POST"}, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResponseHeaders(200, nil); err != nil {
		t.Fatal(err)
	}
	_ = s.SendResponseBody([]byte("hello "), false)
	_ = s.SendResponseBody([]byte("world"), true)
	got, eos, err := s.RecvResponseBody()
	if err != nil || string(got) != "hello world" || !eos {
		t.Fatalf("%q %v %v", got, eos, err)
	}
}

func TestHeadersOnlyRequestIsAnsweredWithoutABody(t *testing.T) {
	addr := "127.0.6.4:9002"
	p := &proc{}
	serve(t, addr, p)
	s, err := client(t, addr).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reply, err := s.Request(map[string]string{":method": "GET", ":path": "/v1/models"}, nil)
	if err != nil || reply.Body != nil || reply.SetHeaders[extproc.DestinationKey] == "" {
		t.Fatalf("%+v %v", reply, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.body != nil {
		t.Fatal("headers with end of stream reach the EPP as a nil body")
	}
}

func TestImmediateResponseAndFailure(t *testing.T) {
	addr := "127.0.6.5:9002"
	serve(t, addr, &proc{immediate: &extproc.Immediate{Status: 429, Body: []byte("too many"), Headers: map[string]string{"x-reason": "queue"}}})
	s, err := client(t, addr).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Request(map[string]string{":method": "POST"}, []byte("{}"))
	s.Close()
	if err != nil || reply.Immediate == nil || reply.Immediate.Status != 429 || string(reply.Immediate.Body) != "too many" ||
		reply.Immediate.Headers["x-reason"] != "queue" {
		t.Fatalf("%+v %v", reply.Immediate, err)
	}

	addr = "127.0.6.6:9002"
	serve(t, addr, &proc{fail: true})
	s, err = client(t, addr).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Request(map[string]string{":method": "POST"}, []byte("{}"))
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "failed to handle request") {
		t.Fatalf("an error the EPP returns ends the stream with gRPC status 2: %v", err)
	}
}
