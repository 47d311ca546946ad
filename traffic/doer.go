package traffic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// errorBodyLimit bounds how much of an error answer's body a Result keeps.
const errorBodyLimit = 4 << 10

// drainLimit bounds how much unread body Close drains so that the connection
// can be reused (go-openai's JSON decoder may stop before the body's end).
const drainLimit = 64 << 10

// exchange carries one request's additions to the doer and the response facts
// back from it. go-openai calls the doer synchronously on the goroutine that
// runs the request, and the body is read on that goroutine too, so an
// exchange needs no locking.
//
// Each worker reuses one exchange, reset per request, and carries it in its
// context (withExchange); the body wrappers live in it. That saves several
// allocations per request; nothing holds an exchange past its request.
type exchange struct {
	// in
	headers   map[string]string
	extraBody map[string]json.RawMessage
	stream    bool

	// out
	sentAt   time.Time
	status   int
	header   http.Header
	errBody  bytes.Buffer
	sawDone  bool
	mergeErr error
	outcome  outcome

	// the answer's body, wrapped as it needs
	drain drainBody
	tee   teeBody
	sse   sseBody
}

type exchangeKey struct{}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

// doer is the openai.HTTPDoer the client calls: it adds the plan's headers
// and extra body fields to the request go-openai built, and wraps the answer
// so that its status, headers, error body and "[DONE]" line are recorded.
// Adding fields here, after go-openai's encoder, keeps the library unforked.
type doer struct {
	client *http.Client
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex == nil {
		return d.send(req)
	}
	for name, value := range ex.headers {
		req.Header.Set(name, value)
	}
	if len(ex.extraBody) > 0 {
		if err := mergeBody(req, ex.extraBody); err != nil {
			ex.mergeErr = err
			return nil, err
		}
	}
	ex.sentAt = time.Now()
	resp, err := d.send(req)
	if err != nil {
		return nil, err
	}
	ex.status = resp.StatusCode
	ex.header = resp.Header
	switch {
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		ex.tee = teeBody{ReadCloser: resp.Body, buf: &ex.errBody}
		resp.Body = &ex.tee
	case ex.stream:
		ex.sse = sseBody{ReadCloser: resp.Body, ex: ex}
		resp.Body = &ex.sse
	default:
		ex.drain = drainBody{ReadCloser: resp.Body}
		resp.Body = &ex.drain
	}
	return resp, nil
}

// send is what d.client.Do does for the driver's requests, less the copy of
// the request headers Client.Do makes on every request for redirects (the
// client follows none: a 3xx is the answer). Errors are *url.Error as from
// Client.Do. A URL with credentials goes through Client.Do, which turns them
// into an Authorization header.
func (d *doer) send(req *http.Request) (*http.Response, error) {
	if req.URL.User != nil {
		return d.client.Do(req)
	}
	resp, err := d.client.Transport.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// urlErrorOp is how Client.Do names the method in a *url.Error ("Post").
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// mergeBody adds fields to the JSON object in req's body.
func mergeBody(req *http.Request, fields map[string]json.RawMessage) error {
	if req.Body == nil {
		return fmt.Errorf("traffic: request to %s has no body to add fields to", req.URL.Path)
	}
	raw, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("traffic: reading request body: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("traffic: request body is not a JSON object: %w", err)
	}
	for k, v := range fields {
		body[k] = v
	}
	merged, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("traffic: encoding request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(merged))
	req.ContentLength = int64(len(merged))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(merged)), nil }
	return nil
}

// teeBody keeps the first errorBodyLimit bytes read.
type teeBody struct {
	io.ReadCloser
	buf *bytes.Buffer
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if room := errorBodyLimit - t.buf.Len(); room > 0 && n > 0 {
		t.buf.Write(p[:min(n, room)])
	}
	return n, err
}

// drainBody reads what the decoder left (a trailing newline, the chunked
// terminator) before closing, so the connection goes back to the pool.
type drainBody struct {
	io.ReadCloser
	scratch [256]byte
}

func (d *drainBody) Close() error {
	drain(d.ReadCloser, d.scratch[:])
	return d.ReadCloser.Close()
}

// drain reads r until EOF, an error or drainLimit bytes, into scratch.
func drain(r io.Reader, scratch []byte) {
	for n := 0; n < drainLimit; {
		m, err := r.Read(scratch)
		n += m
		if err != nil {
			return
		}
	}
}

// sseBody watches the event stream for the "data: [DONE]" line, which
// go-openai consumes without telling its caller: a stream that simply ends
// reads the same as one that finished.
type sseBody struct {
	io.ReadCloser
	ex *exchange
	// line holds the start of the current line (enough to recognise [DONE]).
	line    [32]byte
	lineLen int
	long    bool
}

func (s *sseBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	data := p[:n]
	for len(data) > 0 {
		end := bytes.IndexByte(data, '\n')
		part := data
		if end >= 0 {
			part = data[:end]
		}
		copied := copy(s.line[s.lineLen:], part)
		s.lineLen += copied
		if copied < len(part) {
			s.long = true
		}
		if end < 0 {
			break
		}
		s.endLine()
		data = data[end+1:]
	}
	if err == io.EOF && s.lineLen > 0 {
		s.endLine() // a last line without its newline still counts
	}
	return n, err
}

// Close drains a finished stream (the chunked terminator after [DONE]) so the
// connection can be reused; an unfinished one is just closed.
func (s *sseBody) Close() error {
	if s.ex.sawDone {
		drain(s.ReadCloser, s.ex.drain.scratch[:])
	}
	return s.ReadCloser.Close()
}

func (s *sseBody) endLine() {
	if !s.long && isDoneLine(s.line[:s.lineLen]) {
		s.ex.sawDone = true
	}
	s.lineLen, s.long = 0, false
}

// isDoneLine matches `data:[ws][DONE][ws]` as go-openai does.
func isDoneLine(line []byte) bool {
	line = bytes.TrimSpace(line)
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	return ok && string(bytes.TrimSpace(rest)) == "[DONE]"
}

// headerName is a response header to capture: its canonical form for the
// lookup and its lower-case form for the Result.
type headerName struct{ canonical, lower string }

func headerNames(names []string) []headerName {
	out := make([]headerName, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		c := http.CanonicalHeaderKey(n)
		if !seen[c] {
			seen[c] = true
			out = append(out, headerName{canonical: c, lower: strings.ToLower(n)})
		}
	}
	return out
}

// capture returns the wanted response headers that are present, keyed by
// lower-case name.
func capture(h http.Header, names []headerName) map[string]string {
	var out map[string]string
	for _, n := range names {
		if v := h[n.canonical]; len(v) > 0 && v[0] != "" {
			if out == nil {
				out = make(map[string]string, len(names))
			}
			out[n.lower] = v[0]
		}
	}
	return out
}
