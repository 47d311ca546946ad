package traffic

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
)

// The wire format of h1Transport: net/http's Request.Write and ReadResponse,
// with a fast path for the shapes the driver's exchanges have (a POST with a
// known-length body and a few plain headers; an answer with a Content-Length
// or chunked body and plain headers). The fast paths produce what net/http
// produces (TestWireFastPathsMatchNetHTTP compares them byte for byte and
// field by field) and step aside, before consuming anything, for any other
// shape. WHY: net/http's general code (fmt, a header sorter pool, a
// transferWriter, textproto's per-line strings) was ~10% of the driver's CPU
// per request on loopback.

// defaultUserAgent is net/http's.
const defaultUserAgent = "Go-http-client/1.1"

// maxFastHeaders bounds the request headers the fast path sorts on the stack.
const maxFastHeaders = 16

var errBodyLength = errors.New("traffic: request body length differs from its ContentLength")

// writeRequest writes req to bw as http.Request.Write does (User-Agent
// Go-http-client/1.1, Content-Length, headers sorted by key) and closes its
// body.
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	if !fastWritable(req) {
		return req.Write(bw)
	}
	var keys [maxFastHeaders]string
	n := 0
	for k := range req.Header {
		if k != "Content-Length" && k != "Transfer-Encoding" && k != "Trailer" {
			keys[n] = k
			n++
		}
	}
	sorted := keys[:n]
	for i := 1; i < len(sorted); i++ { // insertion sort: a handful of keys
		for j := i; j > 0 && sorted[j] < sorted[j-1]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(req.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\nUser-Agent: " + defaultUserAgent + "\r\nContent-Length: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), req.ContentLength, 10))
	bw.WriteString("\r\n")
	for _, k := range sorted {
		for _, v := range req.Header[k] {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
	written, err := io.Copy(bw, req.Body) // a bytes.Buffer writes itself in: no copy buffer
	if cerr := req.Body.Close(); err == nil {
		err = cerr
	}
	if err == nil && written != req.ContentLength {
		err = fmt.Errorf("%w: ContentLength=%d with Body length %d", errBodyLength, req.ContentLength, written)
	}
	return err
}

// fastWritable reports whether writeRequest's fast path writes req exactly
// as Request.Write would: a token method, a plain host and request URI, a
// body of known non-zero length, no Close, Transfer-Encoding or Trailer, no
// User-Agent header, and header names and values that need no cleaning.
func fastWritable(req *http.Request) bool {
	if req.URL == nil || req.Body == nil || req.Body == http.NoBody || req.ContentLength <= 0 ||
		req.Close || len(req.TransferEncoding) > 0 || req.Trailer != nil ||
		!isToken(req.Method) || len(req.Header) > maxFastHeaders {
		return false
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if host == "" || !plainHost(host) || req.URL.Opaque != "" || !plainURI(req.URL.RequestURI()) {
		return false
	}
	for k, vs := range req.Header {
		if !isToken(k) || k == "Host" || k == "User-Agent" {
			return false
		}
		for _, v := range vs {
			if !plainHeaderValue(v) {
				return false
			}
		}
	}
	return true
}

func isToken(s string) bool { return s != "" && validHeaderName(s) }

// plainHost: ASCII letters, digits, '.', '-', ':' and IPv6 brackets, so no
// punycode conversion, zone or validation applies.
func plainHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-:[]", c) >= 0) {
			return false
		}
	}
	return true
}

// plainURI: printable ASCII without spaces.
func plainURI(u string) bool {
	for i := 0; i < len(u); i++ {
		if u[i] <= ' ' || u[i] >= 0x7f {
			return false
		}
	}
	return u != ""
}

// plainHeaderValue: no control characters (so nothing to replace) and no
// leading or trailing space or tab (so nothing to trim).
func plainHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return v == "" || (v[0] != ' ' && v[0] != '\t' && v[len(v)-1] != ' ' && v[len(v)-1] != '\t')
}

// readResponse reads an answer's header as http.ReadResponse does and sets up
// its body.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if resp := fastReadResponse(br, req); resp != nil {
		return resp, nil
	}
	return http.ReadResponse(br, req)
}

// commonResponseHeaders are canonical names the fast path does not allocate.
var commonResponseHeaders = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Content-Type", "Content-Length", "Date", "Server", "Vary", "Cache-Control",
		"X-Request-Id", "X-Inference-Pod", "X-Inference-Port", "X-Inference-Namespace",
		"X-Smg-Error-Code", "Access-Control-Allow-Origin", "X-Accel-Buffering",
	} {
		m[k] = k
	}
	return m
}()

// fastReadResponse parses a complete, buffered answer header of the plain
// shape: HTTP/1.1, a final status 200-599 other than 204 and 304, CRLF line
// ends, no folded or odd lines, no Connection, Trailer, Pragma or repeated
// Content-Length, and a body framed by Content-Length or "Transfer-Encoding:
// chunked" (not both). It returns nil, having consumed nothing, for
// anything else, and for a HEAD request.
func fastReadResponse(br *bufio.Reader, req *http.Request) *http.Response {
	if req.Method == http.MethodHead {
		return nil
	}
	if _, err := br.Peek(1); err != nil {
		return nil // let ReadResponse report it
	}
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil
	}
	// One string holds every value and most names.
	block := string(buf[:end+2])
	line, rest, _ := strings.Cut(block, "\r\n")
	const proto = "HTTP/1.1 "
	if len(line) < len(proto)+3 || line[:len(proto)] != proto {
		return nil
	}
	status := line[len(proto):]
	code := 0
	for i := 0; i < 3; i++ {
		c := status[i]
		if c < '0' || c > '9' {
			return nil
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code > 599 || code == http.StatusNoContent || code == http.StatusNotModified ||
		(len(status) > 3 && status[3] != ' ') || !plainHeaderValue(status) {
		return nil
	}

	lines := strings.Count(rest, "\r\n")
	header := make(http.Header, lines)
	values := make([]string, lines) // one backing array, as textproto does
	var canon [64]byte
	contentLength, chunked, framings := int64(-1), false, 0
	for i := 0; rest != ""; i++ {
		line, rest, _ = strings.Cut(rest, "\r\n")
		name, value, ok := strings.Cut(line, ":")
		if !ok || !isToken(name) || len(name) > len(canon) || strings.IndexByte(line, '\n') >= 0 {
			return nil
		}
		value = strings.Trim(value, " \t")
		if !plainHeaderValue(value) {
			return nil
		}
		key := canonicalKey(canon[:0], name)
		if k, ok := commonResponseHeaders[string(key)]; ok {
			name = k
		} else if string(key) != name {
			name = string(key)
		}
		switch name {
		case "Connection", "Trailer", "Pragma": // ReadResponse acts on these
			return nil
		case "Content-Length":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 || value[0] == '+' || contentLength >= 0 {
				return nil
			}
			contentLength = n
			framings++
		case "Transfer-Encoding":
			if !strings.EqualFold(value, "chunked") || chunked {
				return nil
			}
			chunked = true
			framings++
			continue // ReadResponse moves it to Response.TransferEncoding
		}
		if vs := header[name]; vs != nil {
			header[name] = append(vs, value)
			continue
		}
		values[i] = value
		header[name] = values[i : i+1 : i+1]
	}
	if framings != 1 {
		return nil
	}
	if _, err := br.Discard(end + 4); err != nil {
		return nil // cannot happen: the bytes are buffered
	}
	resp := &http.Response{
		Status:        status,
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		ContentLength: contentLength,
		Request:       req,
	}
	switch {
	case chunked:
		resp.TransferEncoding = []string{"chunked"}
		resp.Body = &chunkedBody{br: br, cr: httputil.NewChunkedReader(br)}
	case contentLength == 0:
		resp.Body = http.NoBody
	default:
		resp.Body = &lengthBody{br: br, left: contentLength}
	}
	return resp
}

// canonicalKey appends the canonical form of name (as
// http.CanonicalHeaderKey) to dst.
func canonicalKey(dst []byte, name string) []byte {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
		upper = c == '-'
	}
	return dst
}

// lengthBody is a Content-Length body: a short read is io.ErrUnexpectedEOF,
// as from net/http.
type lengthBody struct {
	br   *bufio.Reader
	left int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		err = io.EOF
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }

// chunkedBody is a chunked body; after the last chunk it reads the trailer
// section, which ends the message, and drops it (h1Transport's callers read
// no trailers).
type chunkedBody struct {
	br  *bufio.Reader
	cr  io.Reader
	err error
}

var errTrailerEOF = errors.New("http: unexpected EOF reading trailer")

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.cr.Read(p)
	if err == io.EOF {
		err = b.readTrailer()
	}
	b.err = err
	return n, err
}

func (b *chunkedBody) readTrailer() error {
	for {
		line, err := b.br.ReadSlice('\n')
		switch {
		case err == io.EOF:
			return errTrailerEOF
		case err != nil:
			return err
		case len(bytes.TrimRight(line, "\r\n")) == 0:
			return io.EOF
		}
	}
}

func (b *chunkedBody) Close() error { return nil }
