// Package reqid is the routers' RequestIdLayer: take the request id from the
// first configured header present, or generate one whose prefix depends on
// the path, and always answer with it in the x-request-id response header.
// The id is not added to the upstream request (docs/routers.md#request-ids-headers-and-streaming).
package reqid

import (
	"context"
	"crypto/rand"
	"math/big"
	"net/http"
	"strings"
)

// DefaultHeaders is the routers' default --request-id-headers.
var DefaultHeaders = []string{"x-request-id", "x-correlation-id", "x-trace-id", "request-id"}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// Generate returns prefix + 24 random alphanumerics. withResponses adds SG's
// "resp-" prefix for /responses paths.
func Generate(path string, withResponses bool) string {
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
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b.WriteByte(alphabet[n.Int64()])
	}
	return b.String()
}

type ctxKey struct{}

// FromContext returns the request id the middleware chose.
func FromContext(ctx context.Context) string {
	s, _ := ctx.Value(ctxKey{}).(string)
	return s
}

// Middleware wraps next.
func Middleware(headers []string, withResponses bool, next http.Handler) http.Handler {
	if len(headers) == 0 {
		headers = DefaultHeaders
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
			id = Generate(r.URL.Path, withResponses)
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
		next.ServeHTTP(&writer{ResponseWriter: w, id: id}, r)
	})
}

// writer sets x-request-id when the status is written, overriding any value
// the handler copied from upstream (the layer runs after the handler).
type writer struct {
	http.ResponseWriter
	id      string
	written bool
}

func (w *writer) WriteHeader(code int) {
	if !w.written {
		w.written = true
		w.ResponseWriter.Header().Set("x-request-id", w.id)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *writer) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *writer) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
