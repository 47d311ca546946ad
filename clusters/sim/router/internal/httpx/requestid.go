package httpx

// The routers' RequestIdLayer: take the request id from the first configured
// header present, or generate one whose prefix depends on the path, and always
// answer with it in the x-request-id response header. The id is not added to
// the upstream request (docs/routers.md#request-ids-headers-and-streaming).

import (
	"context"
	"crypto/rand"
	"math/big"
	"net/http"
	"strings"
)

// DefaultRequestIDHeaders is the routers' default --request-id-headers.
var DefaultRequestIDHeaders = []string{"x-request-id", "x-correlation-id", "x-trace-id", "request-id"}

const requestIDAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewRequestID returns prefix + 24 random alphanumerics. withResponses adds SG's
// "resp-" prefix for /responses paths.
func NewRequestID(path string, withResponses bool) string {
	prefix := "req-"
	switch {
	case strings.Contains(path, "/chat/completions"):
		prefix = "chatcmpl-"
	case strings.Contains(path, "/completions"):
		prefix = "cmpl-"
	case strings.Contains(path, "/generate"):
		prefix = "gnt-"
	case withResponses && strings.Contains(path, "/responses"):
		prefix = "resp-"
	}
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < 24; i++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(requestIDAlphabet))))
		b.WriteByte(requestIDAlphabet[n.Int64()])
	}
	return b.String()
}

type requestIDKey struct{}

// RequestIDFrom returns the request id the middleware chose.
func RequestIDFrom(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey{}).(string)
	return s
}

// RequestID wraps next.
func RequestID(headers []string, withResponses bool, next http.Handler) http.Handler {
	if len(headers) == 0 {
		headers = DefaultRequestIDHeaders
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ""
		for _, h := range headers {
			if v := r.Header.Values(h); len(v) > 0 {
				id = v[0]
				break
			}
		}
		if id == "" {
			id = NewRequestID(r.URL.Path, withResponses)
		}
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		next.ServeHTTP(&requestIDWriter{ResponseWriter: w, id: id}, r)
	})
}

// requestIDWriter sets x-request-id when the status is written, overriding any value
// the handler copied from upstream (the layer runs after the handler).
type requestIDWriter struct {
	http.ResponseWriter
	id      string
	written bool
}

func (w *requestIDWriter) WriteHeader(code int) {
	if !w.written {
		w.written = true
		w.ResponseWriter.Header().Set("x-request-id", w.id)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *requestIDWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *requestIDWriter) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying requestIDWriter.
func (w *requestIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
