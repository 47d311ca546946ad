// Package upstream is how the routers talk to workers: one HTTP client with
// the total request timeout (reqwest's Client::timeout covers the streamed
// body too), the response-header filter both routers apply, and the
// byte-for-byte relay of streamed bodies.
package upstream

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

// Close releases the client's idle connections.
func Close(c *http.Client) {
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
