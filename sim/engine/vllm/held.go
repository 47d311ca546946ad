package vllm

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// heldScheme is a zmq4 transport that binds a socket to a listener the
// container already holds. zmq4 binds only through a registered transport,
// which would call net.Listen itself; going through proc.Container.Listen
// instead keeps the Pod's address rules and lets the kubelet track and
// close the port like every other one the engine opens.
const heldScheme = "sim-held"

type heldListeners struct {
	mu   sync.Mutex
	next int
	ls   map[string]net.Listener
}

var held = &heldListeners{ls: map[string]net.Listener{}}

func init() {
	if err := zmq4.RegisterTransport(heldScheme, held); err != nil {
		panic(err)
	}
}

// listen binds sck to ln.
func (h *heldListeners) listen(sck zmq4.Socket, ln net.Listener) error {
	h.mu.Lock()
	h.next++
	key := strconv.Itoa(h.next)
	h.ls[key] = ln
	h.mu.Unlock()
	if err := sck.Listen(heldScheme + "://" + key); err != nil {
		h.mu.Lock()
		delete(h.ls, key)
		h.mu.Unlock()
		_ = ln.Close()
		return err
	}
	return nil
}

// Listen implements transport.Transport: it hands over the held listener.
func (h *heldListeners) Listen(_ context.Context, key string) (net.Listener, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ln, ok := h.ls[key]
	if !ok {
		return nil, errors.New("no held listener " + key)
	}
	delete(h.ls, key)
	return ln, nil
}

// Dial implements transport.Transport; a held listener is bind-only.
func (*heldListeners) Dial(context.Context, transport.Dialer, string) (net.Conn, error) {
	return nil, errors.New(heldScheme + " cannot dial")
}

// Addr implements transport.Transport: the key is the address.
func (*heldListeners) Addr(ep string) (string, error) { return ep, nil }
