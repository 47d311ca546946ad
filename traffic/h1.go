package traffic

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// h1Transport is the http.RoundTripper of plain-http runs without a proxy
// (see newHTTPTransport). It does each exchange on the goroutine that sends
// the request, over pooled keep-alive HTTP/1.1 connections.
//
// WHY: net/http's Transport hands every request to two goroutines per
// connection (writeLoop, readLoop) and back; on loopback those hand-offs,
// their channels and timers cost about a third of the driver's CPU per
// request (bench/driver-vs-peer.sh, BenchmarkPerRequest*). The bytes on the
// wire stay net/http's: requests are written as http.Request.Write writes
// them and answers parsed as http.ReadResponse parses them, the functions its
// Transport uses (see h1wire.go).
//
// What it keeps from net/http's Transport: a dial error is the dialer's
// *net.OpError; an answer is handed over once its header is read; the
// connection returns to the pool when the body has been read to its end and
// neither side asked to close; 1xx interim answers are skipped; the request's
// deadline bounds the exchange and the body, and once the request's context
// has ended its cause is the error; an idle connection the server has closed
// is not reused (it is probed before reuse, where net/http's readLoop notices
// the close; see probeAfterIdle).
//
// Cancellation is per run, not per request: the request contexts must
// derive from the context passed to abortWhenDone, and end otherwise only at
// their deadline. The deadline is the request exchange's when set (the
// runner then makes no context timer per request), else the context's; I/O
// past it fails with context.DeadlineExceeded, as from net/http. That saves
// a cancel hook and a timer per request.
type h1Transport struct {
	addr        string // host:port
	dialer      net.Dialer
	maxIdle     int
	idleTimeout time.Duration

	aborted atomic.Bool
	mu      sync.Mutex
	idle    []*h1Conn // most recently used last
	open    map[*h1Conn]struct{}
}

type h1Conn struct {
	nc     net.Conn
	probe  *connProbe
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
}

// probeAfterIdle: a connection idle for less than this is reused without
// probing. A server that closes a connection right after a keep-alive answer
// (shutting down) can then fail a request sent within this window, where a
// probe would have redialled; net/http has the same window until its
// readLoop goroutine has run and seen the close, which under load takes as
// long. Under load most reuses come within it, and the probe (a recvfrom)
// was ~5% of the driver's CPU per request.
const probeAfterIdle = 100 * time.Microsecond

// max1xx bounds the interim answers skipped before the final one, as
// net/http does.
const max1xx = 5

// longAgo is a deadline in the past: setting it makes blocked I/O return.
var longAgo = time.Unix(1, 0)

var (
	errTooMany1xx = errors.New("traffic: too many 1xx informational responses")
	errAborted    = errors.New("traffic: connection aborted: the run ended")
)

// abortWhenDone makes every exchange, current or future, fail once ctx
// ends. Call stop when the transport is no longer used.
func (t *h1Transport) abortWhenDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, t.abort)
}

// abort sets the flag first and the deadlines second; RoundTrip sets a
// connection's deadline first and reads the flag second, so that any
// exchange either sees the flag or has its deadline overwritten.
func (t *h1Transport) abort() {
	t.aborted.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.open {
		_ = c.nc.SetDeadline(longAgo)
	}
}

func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeRequestBody(req)
		return nil, context.Cause(ctx)
	}
	c, err := t.conn(ctx)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	fail := func(err error) (*http.Response, error) {
		t.close(c)
		return nil, t.ioErr(ctx, err)
	}
	if t.aborted.Load() {
		closeRequestBody(req)
		return fail(errAborted)
	}
	// writeRequest closes the request body, also on error.
	if err := writeRequest(c.bw, req); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	var resp *http.Response
	for n := 0; ; n++ {
		if resp, err = readResponse(c.br, req); err != nil {
			return fail(err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode < 100 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if n == max1xx {
			return fail(errTooMany1xx)
		}
	}
	resp.Body = &h1Body{
		rc:   resp.Body,
		t:    t,
		c:    c,
		ctx:  ctx,
		keep: !resp.Close && !req.Close,
	}
	return resp, nil
}

// requestDeadline is when the request must be over (zero: never).
func requestDeadline(ctx context.Context) time.Time {
	if ex, _ := ctx.Value(exchangeKey{}).(*exchange); ex != nil && !ex.deadline.IsZero() {
		return ex.deadline
	}
	d, _ := ctx.Deadline()
	return d
}

// ioErr is the error of an exchange whose I/O failed with err: the context's
// once it has ended, context.DeadlineExceeded when the request's deadline
// passed, else err.
func (t *h1Transport) ioErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, os.ErrDeadlineExceeded) && !t.aborted.Load():
		return context.DeadlineExceeded
	}
	return err
}

// conn returns a live idle connection or dials a new one, its deadline set
// to the request's (the probe fails on a connection whose last deadline
// passed).
func (t *h1Transport) conn(ctx context.Context) (*h1Conn, error) {
	deadline := requestDeadline(ctx)
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		c := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if idle := time.Since(c.idleAt); idle < t.idleTimeout && c.nc.SetDeadline(deadline) == nil &&
			(idle < probeAfterIdle || c.probe.idleConnAlive()) {
			return c, nil
		}
		t.close(c)
	}
	dialer := t.dialer
	dialer.Deadline = deadline
	nc, err := dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, t.ioErr(ctx, err)
	}
	if err := nc.SetDeadline(deadline); err != nil {
		_ = nc.Close()
		return nil, err
	}
	c := &h1Conn{nc: nc, probe: newConnProbe(nc), br: bufio.NewReaderSize(nc, 4<<10), bw: bufio.NewWriterSize(nc, 4<<10)}
	t.mu.Lock()
	if t.open == nil {
		t.open = map[*h1Conn]struct{}{}
	}
	t.open[c] = struct{}{}
	t.mu.Unlock()
	return c, nil
}

func (t *h1Transport) close(c *h1Conn) {
	t.mu.Lock()
	delete(t.open, c)
	t.mu.Unlock()
	_ = c.nc.Close()
}

// put pools c, or closes it when the pool is full or the run was aborted.
func (t *h1Transport) put(c *h1Conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if len(t.idle) < t.maxIdle && !t.aborted.Load() {
		t.idle = append(t.idle, c)
		t.mu.Unlock()
		return
	}
	delete(t.open, c)
	t.mu.Unlock()
	_ = c.nc.Close()
}

// CloseIdleConnections closes the pooled connections; a connection in use
// is closed or pooled when its body ends.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	for _, c := range idle {
		delete(t.open, c)
	}
	t.mu.Unlock()
	for _, c := range idle {
		_ = c.nc.Close()
	}
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// h1Body is an answer's body. Like net/http's, it gives its connection back
// as soon as it has been read to the end, Close or not (go-openai does not
// close the body of a failed stream request), and Close before the end
// closes the connection.
type h1Body struct {
	rc   io.ReadCloser // the body http.ReadResponse set up
	t    *h1Transport
	c    *h1Conn
	ctx  context.Context
	keep bool  // neither side asked to close the connection
	done bool  // the connection has been given back or closed
	err  error // what Read returns once done
}

var errBodyClosed = errors.New("http: read on closed response body")

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.err = io.EOF
		b.release(true)
	case err != nil:
		err = b.t.ioErr(b.ctx, err)
		b.err = err
		b.release(false)
	}
	return n, err
}

func (b *h1Body) Close() error {
	if !b.done {
		b.err = errBodyClosed
		b.release(false)
	}
	return nil
}

// release pools the connection when the body ended cleanly and is all read;
// otherwise it closes the connection.
func (b *h1Body) release(atEOF bool) {
	if b.done {
		return
	}
	b.done = true
	if atEOF && b.keep && b.c.br.Buffered() == 0 {
		b.t.put(b.c)
		return
	}
	b.t.close(b.c)
}
