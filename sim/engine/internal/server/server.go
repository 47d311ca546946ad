// Package server is what both engine programs need from their container: the
// sim-only latency knobs from the Pod environment, an HTTP server that stops
// gracefully on SIGTERM (ctx), a status-recording ResponseWriter for access
// logs and request metrics, and line-atomic log writers.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/sim/engine"
)

// Knobs are the simulated model's latencies and answer length.
type Knobs struct {
	// TTFT is the prefill time: from admission to the first token.
	TTFT time.Duration
	// ITL is the gap between consecutive output tokens.
	ITL time.Duration
	// OutputTokens is how many tokens the model generates when max_tokens
	// does not cut it short (the last one is the end-of-turn token).
	OutputTokens int
	// StartupDelay is how long "loading the model" takes before the server
	// is up.
	StartupDelay time.Duration
}

// DefaultKnobs are the values used when the environment sets none.
var DefaultKnobs = Knobs{TTFT: 5 * time.Millisecond, ITL: time.Millisecond, OutputTokens: 16}

// ReadKnobs reads the knobs from env. Durations are Go durations ("5ms");
// a bare "0" is allowed. A bad value is an error naming the variable.
func ReadKnobs(env map[string]string) (Knobs, error) {
	k := DefaultKnobs
	var errs []error
	dur := func(name string, dst *time.Duration) {
		v, ok := env[name]
		if !ok || strings.TrimSpace(v) == "" {
			return
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a non-negative Go duration (e.g. 5ms, 1s, 0)", name, v))
			return
		}
		*dst = d
	}
	dur(engine.EnvTTFT, &k.TTFT)
	dur(engine.EnvITL, &k.ITL)
	dur(engine.EnvStartupDelay, &k.StartupDelay)
	if v, ok := env[engine.EnvOutputTokens]; ok && strings.TrimSpace(v) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s=%q is not a positive integer (tokens the model generates without max_tokens, e.g. 16)", engine.EnvOutputTokens, v))
		} else {
			k.OutputTokens = n
		}
	}
	return k, errors.Join(errs...)
}

// ShutdownGrace bounds how long in-flight requests may finish after SIGTERM.
const ShutdownGrace = 5 * time.Second

// Run serves h on ln until ctx ends, then shuts the server down: in-flight
// requests get ShutdownGrace to finish, then connections are closed (which
// cancels their request contexts).
func Run(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Recorder is a ResponseWriter that remembers the status and body size. It
// keeps Flush and Unwrap so streaming handlers work through it.
type Recorder struct {
	http.ResponseWriter
	Status int
	Bytes  int
}

// WriteHeader records the status.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records the size (and an implicit 200).
func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.Bytes += n
	return n, err
}

// Flush flushes the underlying writer.
func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Code is the recorded status (200 if nothing was written).
func (r *Recorder) Code() int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// Lines writes whole lines to a stream, one Write per line, so lines from
// concurrent requests never interleave mid-line.
type Lines struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewLines wraps w (nil discards).
func NewLines(w io.Writer) *Lines {
	if w == nil {
		w = io.Discard
	}
	return &Lines{w: w}
}

// Print writes prefix+msg and a newline.
func (l *Lines) Print(prefix, msg string) {
	l.mu.Lock()
	l.buf = append(l.buf[:0], prefix...)
	l.buf = append(l.buf, msg...)
	l.buf = append(l.buf, '\n')
	_, _ = l.w.Write(l.buf)
	l.mu.Unlock()
}

// ClientAddr is the "host:port" uvicorn prints for a request's peer.
func ClientAddr(r *http.Request) string {
	if r.RemoteAddr == "" {
		return "-"
	}
	return r.RemoteAddr
}

// AccessLine is uvicorn's access log message:
// `127.0.0.1:54321 - "POST /v1/chat/completions HTTP/1.1" 200 OK`.
func AccessLine(r *http.Request, status int) string {
	var b strings.Builder
	b.Grow(96)
	b.WriteString(ClientAddr(r))
	b.WriteString(` - "`)
	b.WriteString(r.Method)
	b.WriteByte(' ')
	b.WriteString(r.URL.RequestURI())
	b.WriteString(` HTTP/`)
	b.WriteString(strconv.Itoa(r.ProtoMajor))
	b.WriteByte('.')
	b.WriteString(strconv.Itoa(r.ProtoMinor))
	b.WriteString(`" `)
	b.WriteString(strconv.Itoa(status))
	b.WriteByte(' ')
	b.WriteString(http.StatusText(status))
	return b.String()
}

// IsJSON reports whether the request's media type is application/json (both
// engines refuse anything else on their OpenAI routes).
func IsJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/json")
}

// ReadBody reads a request body up to limit bytes into a pooled buffer; call
// the returned release when done with the bytes.
func ReadBody(r *http.Request, limit int64) ([]byte, func(), error) {
	bp := bodyPool.Get().(*[]byte)
	buf := (*bp)[:0]
	lr := io.LimitReader(r.Body, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = buf
			bodyPool.Put(bp)
			return nil, func() {}, err
		}
	}
	if int64(len(buf)) > limit {
		*bp = buf
		bodyPool.Put(bp)
		return nil, func() {}, fmt.Errorf("request body over %d bytes", limit)
	}
	return buf, func() {
		if cap(buf) <= 1<<20 {
			*bp = buf
			bodyPool.Put(bp)
		}
	}, nil
}

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// BufPool hands out byte slices for building response bodies.
var BufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// GetBuf returns a pooled buffer (length 0).
func GetBuf() *[]byte {
	bp := BufPool.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

// PutBuf returns a buffer to the pool (large ones are dropped).
func PutBuf(bp *[]byte) {
	if cap(*bp) <= 1<<20 {
		BufPool.Put(bp)
	}
}
