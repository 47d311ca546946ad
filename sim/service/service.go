// Package service emulates a ClusterIP Service as kube-proxy implements it
// in iptables mode: a stable virtual address that sends each new TCP
// connection to one of the Service's usable endpoints, drawn at random.
//
// What it reproduces, from kube-proxy's source:
//   - Usable endpoints are the Ready ones (EndpointSlice ready: the Pod is
//     Ready and not terminating); only when there is none, the serving
//     terminating ones; kubernetes/kubernetes@008b3652:pkg/proxy/topology.go
//     (CategorizeEndpoints).
//   - The pick is per connection and uniform: the service chain jumps to
//     endpoint i with probability 1/(n-i), the last one unconditionally;
//     kubernetes/kubernetes@092dddd1:pkg/proxy/iptables/proxier.go
//     (writeServiceToEndpointRules, computeProbability).
//   - A connection keeps its endpoint for its life (conntrack), whatever
//     happens to the endpoint list afterwards; it ends when either side
//     closes it.
//   - A Service with no usable endpoint refuses new connections.
//
// What differs: the sim applies an endpoint change at the Pod update itself,
// where kube-proxy applies it at its next sync (up to --iptables-min-sync-period,
// 1 s by default, later); and a refused connection is accepted and reset,
// so a client sees "connection reset" where kube-proxy's REJECT rule gives
// "connection refused".
package service

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Endpoint is one Pod behind the Service, as an EndpointSlice lists it.
type Endpoint struct {
	// Name identifies the endpoint (the Pod name).
	Name string
	// IP is the Pod IP; the Service forwards to IP:targetPort.
	IP string
	// Ready is EndpointSlice's ready: the Pod is Ready and not terminating.
	Ready bool
	// Serving is the Pod's readiness whatever its termination.
	Serving bool
	// Terminating: the Pod has a deletionTimestamp.
	Terminating bool
}

// Service is one running ClusterIP Service. Create it with Listen, feed it
// with SetEndpoints, stop it with Close. It is safe for concurrent use.
type Service struct {
	name       string
	ln         net.Listener
	targetPort int
	dialer     net.Dialer

	mu        sync.Mutex
	endpoints []Endpoint
	conns     map[net.Conn]bool
	counts    map[string]int
	closed    bool
	wg        sync.WaitGroup
}

// Listen starts the Service named name on ip:port, forwarding to
// targetPort on its endpoints. It has no endpoint until SetEndpoints.
func Listen(name, ip string, port, targetPort int) (*Service, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", name, err)
	}
	s := &Service{name: name, ln: ln, targetPort: targetPort, dialer: net.Dialer{Timeout: time.Second},
		conns: map[net.Conn]bool{}, counts: map[string]int{}}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Addr is the Service's host:port (its ClusterIP and port).
func (s *Service) Addr() string { return s.ln.Addr().String() }

// SetEndpoints replaces the endpoint list; connections already made keep
// their endpoint.
func (s *Service) SetEndpoints(eps []Endpoint) {
	s.mu.Lock()
	s.endpoints = slices.Clone(eps)
	s.mu.Unlock()
}

// Usable are the endpoints a new connection may go to now: the Ready ones,
// else the serving terminating ones.
func (s *Service) Usable() []Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return usable(s.endpoints)
}

func usable(eps []Endpoint) []Endpoint {
	var ready, terminating []Endpoint
	for _, e := range eps {
		switch {
		case e.Ready && !e.Terminating:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// Connections counts the connections forwarded so far, per endpoint name.
func (s *Service) Connections() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts)
}

func (s *Service) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		eps := usable(s.endpoints)
		var pick Endpoint
		if len(eps) > 0 {
			pick = eps[rand.IntN(len(eps))]
			s.counts[pick.Name]++
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer s.forget(c)
			if pick.IP == "" {
				reset(c) // no usable endpoint: refused
				return
			}
			s.forward(c, pick)
		}()
	}
}

func (s *Service) forget(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// forward relays c to the endpoint until either side is done, as the
// DNATed connection would run.
func (s *Service) forward(c net.Conn, ep Endpoint) {
	up, err := s.dialer.Dial("tcp", net.JoinHostPort(ep.IP, strconv.Itoa(s.targetPort)))
	if err != nil {
		reset(c) // the endpoint refused the SYN: so does the Service's connection
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = up.Close()
		_ = c.Close()
		return
	}
	s.conns[up] = true
	s.mu.Unlock()
	defer s.forget(up)

	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		_, err := io.Copy(up, c)
		if err != nil {
			reset(up)
			return
		}
		closeWrite(up)
	}()
	// The exchange is over when the endpoint is done, as with
	// tools/portforward; a reset from it (a killed Pod) is passed on.
	if _, err := io.Copy(c, up); err != nil && !errors.Is(err, net.ErrClosed) {
		reset(c)
	}
	_ = c.Close()
	_ = up.Close()
	<-upDone
}

// reset closes c with a RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

// Close stops the Service: the address stops accepting and every
// connection through it is closed.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	err := s.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
	return err
}
