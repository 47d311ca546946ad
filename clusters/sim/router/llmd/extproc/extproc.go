// Package extproc is the contract between the envoy and epp containers of an
// llm-d router Pod. The real pair speaks Envoy's ext_proc gRPC protocol over
// 127.0.0.1:9002 in FULL_DUPLEX_STREAMED mode (operator-rendered envoy.yaml;
// llm-d-router pkg/epp/handlers/server.go). The sim keeps the shape — one
// stream per HTTP request carrying request headers+body, then response
// headers and body chunks, each answered with mutations or an immediate
// response — but in process: the EPP registers its processor under its Pod
// address and port, and Envoy dials that address. Dialing an address nobody
// serves fails as a refused connection does, which is what triggers
// failure_mode_allow.
package extproc

import (
	"context"
	"errors"
	"sync"
)

// ErrUnavailable is a dial to an address no processor serves.
var ErrUnavailable = errors.New("ext_proc: connection refused")

// Processor is the ext_proc server.
type Processor interface {
	// Open starts the stream of one HTTP request.
	Open(ctx context.Context) Stream
}

// Stream is one request's ext_proc exchange. Methods are called in order:
// Request, then (unless Request answered immediately) ResponseHeaders and
// ResponseBody until end of stream; Close always.
type Stream interface {
	// Request sends the request headers (lower-case names, pseudo-headers
	// ":method", ":path", ":authority") and the whole body; the EPP buffers
	// the body until end of stream before answering in either mode. A nil
	// body means the headers carried end of stream (a GET).
	Request(headers map[string]string, body []byte) (RequestReply, error)
	// ResponseHeaders sends the upstream status and headers.
	ResponseHeaders(status int, headers map[string]string) (map[string]string, error)
	// ResponseBody sends a body chunk; it returns what Envoy forwards to the
	// client (a non-streaming response comes back whole at end of stream).
	ResponseBody(chunk []byte, endOfStream bool) ([]byte, error)
	// Close ends the stream (client done, upstream error or cancel).
	Close()
}

// RequestReply is the EPP's answer to the request phase: header mutations
// and the (possibly re-serialised) body, or an immediate response.
type RequestReply struct {
	SetHeaders map[string]string
	Body       []byte
	Immediate  *Immediate
}

// Immediate is an ImmediateResponse: Envoy answers the client itself.
type Immediate struct {
	Status  int
	Body    []byte
	Headers map[string]string
}

// Network is the in-process address table, standing in for the Pod's
// loopback interface.
type Network struct {
	mu    sync.RWMutex
	procs map[string]Processor
}

// NewNetwork returns an empty table.
func NewNetwork() *Network { return &Network{procs: map[string]Processor{}} }

// Default is the process-wide table the programs use unless told otherwise.
var Default = NewNetwork()

// Listen serves p at addr until the returned function is called.
func (n *Network) Listen(addr string, p Processor) (func(), error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.procs[addr]; ok {
		return nil, errors.New("ext_proc: listen " + addr + ": address already in use")
	}
	n.procs[addr] = p
	return func() {
		n.mu.Lock()
		if n.procs[addr] == p {
			delete(n.procs, addr)
		}
		n.mu.Unlock()
	}, nil
}

// Dial returns the processor at addr or ErrUnavailable.
func (n *Network) Dial(addr string) (Processor, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if p, ok := n.procs[addr]; ok {
		return p, nil
	}
	return nil, ErrUnavailable
}
