package envoy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/status"

	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
)

// Proxy is the HTTP connection manager, ext_proc filter and router filter.
type Proxy struct {
	cfg       *Config
	ext       *extproc.Client
	transport *http.Transport
	log       io.Writer
	logMu     sync.Mutex
}

// NewProxy builds the proxy; ext is the ext_proc client (nil: the filter
// is absent) and log the access-log stream (stdout).
func NewProxy(cfg *Config, ext *extproc.Client, log io.Writer) *Proxy {
	return &Proxy{cfg: cfg, ext: ext, log: log, transport: &http.Transport{
		// connect_timeout: 1s on the clusters.
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     time.Hour,
	}}
}

// Close releases idle upstream connections.
func (p *Proxy) Close() { p.transport.CloseIdleConnections() }

// entry is what one access-log line reports.
type entry struct {
	start               time.Time
	method, path, proto string
	code                int
	flags, details      string
	upstream, requestID string
	received, sent      int
	originalPath        string
}

// hopByHop headers are not forwarded.
var hopByHop = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true, "te": true, "trailer": true}

// relayBuffers hold the response relay's read buffers; chunks handed on
// are copied out of them first.
var relayBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := &entry{start: time.Now(), method: r.Method, path: r.URL.RequestURI(), proto: r.Proto, flags: "-"}
	defer p.write(e)
	headers := map[string]string{}
	for k, v := range r.Header {
		if lk := strings.ToLower(k); !hopByHop[lk] && len(v) > 0 {
			headers[lk] = v[0]
		}
	}
	// header_mutation runs before ext_proc: the client cannot pick the upstream.
	for _, h := range p.cfg.RemoveHeaders {
		delete(headers, h)
	}
	if headers["x-request-id"] == "" {
		headers["x-request-id"] = uuid.NewString()
	}
	e.requestID = headers["x-request-id"]
	e.originalPath = headers["x-envoy-original-path"]
	headers["x-forwarded-proto"] = "http"
	headers[":method"], headers[":path"], headers[":authority"], headers[":scheme"] = r.Method, e.path, r.Host, "http"

	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			e.code, e.details = 400, "downstream_remote_disconnect"
			return
		}
		if len(b) > 0 || r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
			body = b
		}
	}
	e.received = len(body)

	var stream *extproc.ClientStream
	if p.ext != nil {
		st, err := p.ext.Open(r.Context())
		switch {
		case err == nil:
			stream = st
		case !p.cfg.FailureModeAllow:
			p.local(w, e, 500, "", grpcDetails(err), "")
			return
		}
	}
	if stream != nil {
		defer stream.Close()
		reply, err := stream.Request(headers, body)
		switch {
		case err != nil && p.cfg.FailureModeAllow:
			stream = nil
		case err != nil:
			p.local(w, e, 500, "", grpcDetails(err), "")
			return
		case reply.Immediate != nil:
			im := reply.Immediate
			for k, v := range im.Headers {
				w.Header().Set(k, v)
			}
			p.local(w, e, im.Status, "", "", string(im.Body))
			return
		default:
			for k, v := range reply.SetHeaders {
				if mutable(k) {
					headers[k] = v
				}
			}
			if reply.Body != nil {
				body = reply.Body
			}
		}
	}
	dst := headers[p.cfg.DestinationHeader]
	if _, _, err := net.SplitHostPort(dst); err != nil || net.ParseIP(hostOf(dst)) == nil {
		// ORIGINAL_DST without a usable header and no restored local address.
		p.local(w, e, 503, "UH", "no_healthy_upstream", "no healthy upstream")
		return
	}
	e.upstream = dst
	p.forward(w, r, e, headers, body, stream)
}

// grpcDetails is the response code details of a failed ext_proc stream:
// ext_proc_error_gRPC_error_<status code>.
func grpcDetails(err error) string {
	return "ext_proc_error_gRPC_error_" + strconv.Itoa(int(status.Code(err)))
}

// mutable is ext_proc's default mutation rule (no mutation_rules set):
// every header but host, :authority, :scheme, :method and x-envoy-*.
func mutable(k string) bool {
	switch k {
	case "host", ":authority", ":scheme", ":method":
		return false
	}
	return !strings.HasPrefix(k, "x-envoy")
}

func hostOf(hostPort string) string {
	h, _, _ := net.SplitHostPort(hostPort)
	return h
}

// forward is the router filter: send upstream within the route timeout
// and relay the response through the ext_proc response phase.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, e *entry, headers map[string]string, body []byte, stream *extproc.ClientStream) {
	ctx := r.Context()
	var cancel context.CancelFunc = func() {}
	if p.cfg.RouteTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, p.cfg.RouteTimeout)
		headers["x-envoy-expected-rq-timeout-ms"] = strconv.FormatInt(p.cfg.RouteTimeout.Milliseconds(), 10)
	}
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+e.upstream+headers[":path"], bytes.NewReader(body))
	if err != nil {
		p.local(w, e, 503, "UF", "upstream_reset_before_response_started{connection_failure}", "upstream connect error or disconnect/reset before headers. reset reason: connection failure")
		return
	}
	for k, v := range headers {
		if strings.HasPrefix(k, ":") || k == "content-length" {
			continue
		}
		req.Header.Set(k, v)
	}
	req.Host = headers[":authority"]
	req.ContentLength = int64(len(body))
	sent := time.Now()
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			p.local(w, e, 504, "UT", "upstream_response_timeout", "upstream request timeout")
		case errors.Is(err, syscall.ECONNREFUSED):
			p.local(w, e, 503, "UF", "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}",
				"upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused")
		default:
			p.local(w, e, 503, "UC", "upstream_reset_before_response_started{connection_termination}",
				"upstream connect error or disconnect/reset before headers. reset reason: connection termination")
		}
		return
	}
	defer resp.Body.Close()
	out := w.Header()
	respHeaders := map[string]string{}
	for k, v := range resp.Header {
		if lk := strings.ToLower(k); !hopByHop[lk] && len(v) > 0 {
			respHeaders[lk] = v[0]
			out[k] = v
		}
	}
	if stream != nil {
		set, err := stream.ResponseHeaders(resp.StatusCode, respHeaders)
		if err == nil {
			for k, v := range set {
				out.Set(k, v)
			}
		} else if !p.cfg.FailureModeAllow {
			p.local(w, e, 500, "", grpcDetails(err), "")
			return
		} else {
			stream = nil
		}
	}
	out.Set("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(sent).Milliseconds(), 10))
	out.Set("server", "envoy")
	out.Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	e.code, e.details = resp.StatusCode, "via_upstream"
	flusher, _ := w.(http.Flusher)
	p.relay(ctx, w, flusher, e, resp.Body, stream)
}

// piece is a response body chunk on its way to the client, or the error
// that ended its source.
type piece struct {
	data []byte
	eos  bool
	err  error
}

// relay is the response body in FULL_DUPLEX_STREAMED mode: upstream chunks
// go to the EPP as they arrive and the client gets what the EPP streams
// back (every chunk of a streamed response, a buffered one at its end).
// Should the stream fail, failure_mode_allow relays the rest unchanged.
func (p *Proxy) relay(ctx context.Context, w http.ResponseWriter, flusher http.Flusher, e *entry, upstream io.Reader, stream *extproc.ClientStream) {
	var failed atomic.Bool
	failed.Store(stream == nil)
	raw := make(chan piece, 8)
	stop := make(chan struct{})
	defer close(stop)
	var sentEOS atomic.Bool
	go func() {
		bp := relayBuffers.Get().(*[]byte)
		defer relayBuffers.Put(bp)
		buf := *bp
		for {
			n, rerr := upstream.Read(buf)
			eos := rerr == io.EOF
			if rerr != nil && !eos {
				select {
				case raw <- piece{err: rerr}:
				case <-stop:
				}
				return
			}
			if n > 0 || eos {
				chunk := append([]byte(nil), buf[:n]...)
				if failed.Load() || stream.SendResponseBody(chunk, eos) != nil {
					select {
					case raw <- piece{data: chunk, eos: eos}:
					case <-stop:
						return
					}
				} else if eos {
					sentEOS.Store(true)
				}
			}
			if eos {
				return
			}
		}
	}()
	var fromEPP chan piece
	if stream != nil {
		fromEPP = make(chan piece, 8)
		go func() {
			for {
				data, eos, err := stream.RecvResponseBody()
				select {
				case fromEPP <- piece{data: data, eos: eos, err: err}:
				case <-stop:
					return
				}
				if err != nil || eos {
					return
				}
			}
		}()
	}
	write := func(pc piece) bool {
		if len(pc.data) > 0 {
			m, werr := w.Write(pc.data)
			e.sent += m
			if werr != nil {
				e.flags = "DC"
				return false
			}
			// Streamed chunks go out as they come; the last write
			// leaves with the end of the response.
			if flusher != nil && !pc.eos {
				flusher.Flush()
			}
		}
		return !pc.eos
	}
	for {
		select {
		case pc := <-fromEPP:
			if pc.err != nil {
				// What the EPP held is lost with the stream; what is still
				// to come is relayed as it is.
				failed.Store(true)
				fromEPP = nil
				if sentEOS.Load() {
					return
				}
				continue
			}
			if !write(pc) {
				return
			}
		case pc := <-raw:
			if pc.err != nil {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					e.flags, e.details = "UT", "upstream_response_timeout"
				} else {
					e.flags, e.details = "UR", "upstream_reset_after_response_started{remote_reset}"
				}
				panic(http.ErrAbortHandler) // reset the downstream stream, as Envoy does
			}
			if !write(pc) {
				return
			}
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				e.flags, e.details = "UT", "upstream_response_timeout"
				panic(http.ErrAbortHandler)
			}
			e.flags = "DC"
			return
		}
	}
}

// local is a local reply (sendLocalReply): text/plain body when set.
func (p *Proxy) local(w http.ResponseWriter, e *entry, code int, flags, details, body string) {
	e.code = code
	if flags != "" {
		e.flags = flags
	}
	e.details = details
	if body != "" {
		w.Header().Set("content-type", "text/plain")
		w.Header().Set("content-length", strconv.Itoa(len(body)))
	}
	w.Header().Set("server", "envoy")
	w.WriteHeader(code)
	n, _ := io.WriteString(w, body)
	e.sent = n
}

// write emits the access-log line in json_format's key order: numbers for
// the numeric operators, null for unavailable values, as Envoy's typed
// JSON formatter does.
func (p *Proxy) write(e *entry) {
	if len(p.cfg.AccessLog) == 0 {
		return
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range p.cfg.AccessLog {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(e.value(f.Format))
	}
	b.WriteString("}\n")
	p.logMu.Lock()
	_, _ = p.log.Write(b.Bytes())
	p.logMu.Unlock()
}

func (e *entry) value(format string) []byte {
	str := func(s string) []byte {
		if s == "" {
			return []byte("null")
		}
		b, _ := json.Marshal(s)
		return b
	}
	num := func(n int64) []byte { return []byte(strconv.FormatInt(n, 10)) }
	switch format {
	case "%START_TIME%":
		return str(e.start.UTC().Format("2006-01-02T15:04:05.000Z"))
	case "%REQ(:METHOD)%":
		return str(e.method)
	case "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%":
		if e.originalPath != "" {
			return str(e.originalPath)
		}
		return str(e.path)
	case "%PROTOCOL%":
		return str(e.proto)
	case "%RESPONSE_CODE%":
		return num(int64(e.code))
	case "%RESPONSE_FLAGS%":
		return str(e.flags)
	case "%RESPONSE_CODE_DETAILS%":
		return str(e.details)
	case "%DURATION%":
		return num(time.Since(e.start).Milliseconds())
	case "%UPSTREAM_HOST%":
		return str(e.upstream)
	case "%REQ(X-REQUEST-ID)%":
		return str(e.requestID)
	case "%BYTES_RECEIVED%":
		return num(int64(e.received))
	case "%BYTES_SENT%":
		return num(int64(e.sent))
	}
	return []byte("null")
}
