// Package httpx is the HTTP plumbing both routers share: from their axum
// stacks the method guard, the request body limit, the Json extractor's
// rejections, plain-text and insertion-ordered JSON bodies, the request-id
// layer (requestid.go) and the answer of one routed attempt (upstream's,
// buffered or live, or the router's own); from reqwest the worker client,
// its header filter and the streaming relay (upstream.go). What a router
// answers, and with which error shape, stays in the router.
package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Only lets method m through to h (GET also admits HEAD) and answers
// anything else 405 with the given Allow header.
func Only(m, allow string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", allow)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	}
}

// LimitBody is --max-payload-size: a declared Content-Length over max is
// refused at once with 413; a body that grows past it fails when read.
func LimitBody(max uint64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > int64(max) {
			Text(w, http.StatusRequestEntityTooLarge, "length limit exceeded")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, int64(max))
		next.ServeHTTP(w, r)
	})
}

// Text writes a text/plain answer with its Content-Length.
func Text(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Ordered renders an object from alternating keys and values, keeping the
// keys in the given order (serde_json's preserve_order); a json.RawMessage
// value is written as is.
func Ordered(kv ...any) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, ok := kv[i].(string)
		if !ok {
			k = fmt.Sprint(kv[i])
		}
		var v any
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		kb, _ := json.Marshal(k)
		var vb []byte
		if raw, ok := v.(json.RawMessage); ok {
			vb = raw
		} else {
			vb, _ = json.Marshal(v)
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Rejection is an answer of axum's Json extractor: its status, which
// rejection it is, and its text.
type Rejection struct {
	Status int
	Kind   RejectionKind
	Text   string
}

// RejectionKind names axum's JsonRejection variants.
type RejectionKind int

const (
	MissingContentType RejectionKind = iota + 1
	BodyError
	SyntaxError
	DataError
)

// DecodeJSON reads and decodes a JSON object body the way axum's Json
// extractor does: 415 without a JSON content type, 413 over the payload
// limit, 400 for a syntax error (serde_json's message and position), 422
// for a body of the wrong shape or without a required field (checked in
// order, reported where the object ends).
func DecodeJSON(r *http.Request, required ...string) (body []byte, obj map[string]any, rej *Rejection) {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	if !strings.HasPrefix(ct, "application/json") && !strings.Contains(ct, "+json") {
		return nil, nil, &Rejection{http.StatusUnsupportedMediaType, MissingContentType, "Expected request with `Content-Type: application/json`"}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, &Rejection{http.StatusRequestEntityTooLarge, BodyError, "Failed to buffer the request body: length limit exceeded"}
		}
		return nil, nil, &Rejection{http.StatusBadRequest, BodyError, "Failed to buffer the request body: " + err.Error()}
	}
	msg, end, trailing := serdeSyntax(body)
	if msg != "" {
		return nil, nil, &Rejection{http.StatusBadRequest, SyntaxError, "Failed to parse the request body as JSON: " + msg}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, &Rejection{http.StatusBadRequest, SyntaxError, "Failed to parse the request body as JSON: " + err.Error()}
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		return nil, nil, &Rejection{http.StatusUnprocessableEntity, DataError, "Failed to deserialize the JSON body into the target type: expected a JSON object"}
	}
	for _, f := range required {
		if _, has := obj[f]; !has {
			return nil, nil, &Rejection{http.StatusUnprocessableEntity, DataError,
				"Failed to deserialize the JSON body into the target type: missing field `" + f + "` at " + serdePosition(body, end)}
		}
	}
	if trailing != "" {
		return nil, nil, &Rejection{http.StatusBadRequest, SyntaxError, "Failed to parse the request body as JSON: " + trailing}
	}
	return body, obj, nil
}

// ReadJSON is DecodeJSON answering a rejection as axum does, in plain
// text; ok is false when it has answered.
func ReadJSON(w http.ResponseWriter, r *http.Request, required ...string) (body []byte, obj map[string]any, ok bool) {
	body, obj, rej := DecodeJSON(r, required...)
	if rej != nil {
		Text(w, rej.Status, rej.Text)
		return nil, nil, false
	}
	return body, obj, true
}

// JoinTokenIDs is how both routers turn a request's input_ids into routing
// text: the ids (batches flattened) as JSON numbers, joined by " ".
func JoinTokenIDs(v any) string {
	arr, ok := v.([]any)
	if !ok {
		return ""
	}
	var parts []string
	for _, x := range arr {
		switch t := x.(type) {
		case []any:
			for _, y := range t {
				parts = append(parts, jsonNumber(y))
			}
		default:
			parts = append(parts, jsonNumber(t))
		}
	}
	return strings.Join(parts, " ")
}

func jsonNumber(v any) string {
	switch t := v.(type) {
	case json.Number:
		return t.String()
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return ""
}
