package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
)

// WriteJSON sends body as an application/json response with an exact
// Content-Length (Starlette's JSONResponse).
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// RespondJSON builds a JSON body in a pooled buffer with build and sends it
// with WriteJSON, so a response costs no allocation of its own.
func RespondJSON(w http.ResponseWriter, status int, build func(dst []byte) []byte) {
	bp := GetBuf()
	b := build(*bp)
	WriteJSON(w, status, b)
	*bp = b
	PutBuf(bp)
}

// ClientGone reports whether err, a generation's failure, means the client
// went away (its request context ended, or a write found the connection
// closed): then nobody is left to send an error to.
func ClientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil || errors.Is(err, context.Canceled)
}

// Both engines are FastAPI apps, so a path without a route and a method the
// route does not take get Starlette's answers.

// NotFound is Starlette's 404 for a path without a route.
func NotFound(w http.ResponseWriter) {
	WriteJSON(w, http.StatusNotFound, []byte(`{"detail":"Not Found"}`))
}

// MethodNotAllowed is Starlette's 405, with the route's methods in Allow
// (allow as the route table renders it).
func MethodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	WriteJSON(w, http.StatusMethodNotAllowed, []byte(`{"detail":"Method Not Allowed"}`))
}

// Unauthorized is the 401 of the --api-key middleware (SGLang's is a copy of
// vLLM's). Which routes it guards differs per engine.
func Unauthorized(w http.ResponseWriter) {
	WriteJSON(w, http.StatusUnauthorized, []byte(`{"error":"Unauthorized"}`))
}

// Events is a text/event-stream response as both engines send it: every
// event is "data: <payload>\n\n", written and flushed at once. Use
// StartEvents, then Send, and Close when done.
type Events struct {
	w  http.ResponseWriter
	f  http.Flusher
	bp *[]byte
}

// StartEvents sends the 200 and the event-stream content type.
func StartEvents(w http.ResponseWriter) Events {
	w.Header()["Content-Type"] = []string{"text/event-stream; charset=utf-8"}
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return Events{w: w, f: f, bp: GetBuf()}
}

// Send writes one event whose payload build appends; its error (the client
// is gone) is the write's.
func (e *Events) Send(build func(dst []byte) []byte) error {
	b := append((*e.bp)[:0], "data: "...)
	b = append(build(b), "\n\n"...)
	*e.bp = b
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	if e.f != nil {
		e.f.Flush()
	}
	return nil
}

// Done sends the stream's terminator, "data: [DONE]".
func (e *Events) Done() error {
	return e.Send(func(b []byte) []byte { return append(b, "[DONE]"...) })
}

// Close returns the event buffer to the pool.
func (e *Events) Close() { PutBuf(e.bp) }
