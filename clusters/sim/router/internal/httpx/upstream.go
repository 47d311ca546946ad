package httpx

// How the routers talk to workers (reqwest): one HTTP client with the total
// request timeout (reqwest's Client::timeout covers the streamed body too),
// the response-header filter both routers apply, and the byte-for-byte relay
// of streamed bodies.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// NewClient returns a client whose Timeout is the routers'
// --request-timeout-secs and whose connect timeout is reqwest's 10 s.
func NewClient(total time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 500,
		IdleConnTimeout:     50 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: total}
}

// CloseIdle releases the client's idle connections.
func CloseIdle(c *http.Client) {
	if tr, ok := c.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// hopByHop are the response headers preserve_response_headers drops.
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-authenticate": true, "proxy-authorization": true,
	"te": true, "trailers": true, "transfer-encoding": true, "upgrade": true,
	"content-encoding": true, "host": true,
}

// CopyResponseHeaders copies src into dst without hop-by-hop headers.
func CopyResponseHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopByHop[strings.ToLower(k)] {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// Relay copies body to w chunk by chunk, flushing after each, calling onChunk
// with every chunk before it is written. It returns when the body ends, the
// upstream fails, or the client goes away.
func Relay(w http.ResponseWriter, body io.Reader, onChunk func([]byte)) error {
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32*1024)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if onChunk != nil {
				onChunk(buf[:n])
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// IsTimeout reports a client timeout error.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// Result is one upstream exchange.
type Result struct {
	// Err is set when the request could not be sent or its body not read
	// (Status is then 0).
	Err error
	// ReadErr is true when Err happened while reading the body.
	ReadErr bool
	Status  int
	Header  http.Header
	// Body is the whole body, when it was buffered.
	Body []byte
	// Live is the response whose body is still to be relayed (streams the
	// caller keeps); the caller must close Live.Body.
	Live *http.Response
}

// Send POSTs (or sends method) body to url with hdr. A non-stream answer is
// buffered whole; a stream answer is buffered only when buffer(status) says
// so (the router is going to retry it), else handed back live.
func Send(ctx context.Context, client *http.Client, method, url string, body []byte, hdr http.Header, stream bool, buffer func(status int) bool) Result {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return Result{Err: err}
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	if stream && (buffer == nil || !buffer(resp.StatusCode)) {
		return Result{Status: resp.StatusCode, Header: resp.Header, Live: resp}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Result{Err: err, ReadErr: true, Status: resp.StatusCode, Header: resp.Header}
	}
	return Result{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
