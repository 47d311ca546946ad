// Package extproc is Envoy's ext_proc gRPC protocol
// (envoy.service.ext_proc.v3.ExternalProcessor, the go-control-plane
// types) between the envoy and epp containers of an llm-d router Pod. The
// operator's envoy.yaml points the ext_proc filter at 127.0.0.1:9002 with
// request and response bodies in FULL_DUPLEX_STREAMED mode, headers and
// trailers SEND, failure_mode_allow: true. The EPP serves that stream
// (Serve: llm-d-router pkg/epp/handlers/server.go), the envoy emulation is
// its client (Client), both over real TCP on the Pod's address.
//
// Processor and Stream are what the emulated EPP implements: one stream per
// HTTP request, the request answered once its body has ended (the EPP
// buffers it in either body mode), then response headers and body chunks.
package extproc

import (
	"context"
)

// Destination names where the EPP's pick travels: a request header and a
// key of the dynamic metadata namespace DestinationNamespace
// (llm-d-router pkg/epp/metadata/consts.go).
const (
	DestinationKey       = "x-gateway-destination-endpoint"
	DestinationNamespace = "envoy.lb"
)

// Processor is the ext_proc server's per-request handler factory.
type Processor interface {
	// Open starts the stream of one HTTP request.
	Open(ctx context.Context) Stream
}

// Stream is one request's ext_proc exchange. Methods are called in order:
// Request, then (unless Request answered immediately) ResponseHeaders and
// ResponseBody until end of stream; Close always.
type Stream interface {
	// Request gets the request headers (lower-case names, pseudo-headers
	// ":method", ":path", ":authority") and the whole body. A nil body means
	// the headers carried end of stream (a GET).
	Request(headers map[string]string, body []byte) (RequestReply, error)
	// ResponseHeaders gets the upstream status and headers.
	ResponseHeaders(status int, headers map[string]string) (map[string]string, error)
	// ResponseBody gets a body chunk and returns what Envoy forwards to the
	// client; nil sends nothing back yet (a buffered response comes back
	// whole at end of stream).
	ResponseBody(chunk []byte, endOfStream bool) ([]byte, error)
	// Close ends the stream (client done, upstream error or cancel).
	Close()
}

// RequestReply is the EPP's answer to the request phase: header mutations,
// the (possibly re-serialised) body and the picked destination, or an
// immediate response.
type RequestReply struct {
	SetHeaders map[string]string
	Body       []byte
	// Destination goes into the dynamic metadata (envoy.lb); the server
	// sends it only when set.
	Destination string
	Immediate   *Immediate
}

// Immediate is an ImmediateResponse: Envoy answers the client itself.
type Immediate struct {
	Status  int
	Body    []byte
	Headers map[string]string
}

// bodyChunk is the most body bytes one message carries; the EPP splits its
// body mutations at 62000 bytes (llm-d-router pkg/common/envoy/chunking.go,
// BodyByteLimit), and Envoy's data frames are smaller still.
const bodyChunk = 62000
