package httpx

import (
	"net/http"
	"strconv"
)

// Outcome is one routed attempt's answer: upstream's, buffered (Body) or
// live (Live), or one the router made itself.
type Outcome struct {
	Status int
	Header http.Header
	Body   []byte
	// RouterMade marks an answer the router wrote: plain text when Header
	// is nil, else Body with Header as given (SG's JSON errors); it is never
	// retyped as an event stream.
	RouterMade bool
	// Live is an upstream response whose body is still to be relayed;
	// Write closes it.
	Live *http.Response
	// OnChunk sees every relayed chunk of Live before it is written.
	OnChunk func([]byte)
	// Done runs once the answer has been written (a load release).
	Done func()
}

// RouterText is a plain-text answer the router made.
func RouterText(status int, msg string) Outcome {
	return Outcome{Status: status, Body: []byte(msg), RouterMade: true}
}

// Write answers the client with o (both routers' response path): a live
// body is relayed chunk by chunk, unchanged, with the upstream status and
// filtered headers and Content-Type forced to text/event-stream; a buffered
// one is written whole with its Content-Length, as an event stream when
// the request asked for one; router-made text as text/plain.
func (o Outcome) Write(w http.ResponseWriter, stream bool) {
	if o.Done != nil {
		defer o.Done()
	}
	h := w.Header()
	if o.Live != nil {
		defer o.Live.Body.Close()
		CopyResponseHeaders(h, o.Live.Header)
		h.Del("Content-Length")
		h.Set("Content-Type", "text/event-stream")
		w.WriteHeader(o.Status)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		_ = Relay(w, o.Live.Body, o.OnChunk)
		return
	}
	if o.RouterMade && o.Header == nil {
		Text(w, o.Status, string(o.Body))
		return
	}
	CopyResponseHeaders(h, o.Header)
	if stream && !o.RouterMade {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Content-Length", strconv.Itoa(len(o.Body)))
	w.WriteHeader(o.Status)
	_, _ = w.Write(o.Body)
}
