package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"

	"github.com/gpustack/routing-conformance/sim/apiserver/testca"
)

// Port-forward timeouts, the kubelet's defaults (streaming.DefaultConfig).
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// kubeletServer is the part of the kubelet API the API server calls:
// GET /containerLogs/{namespace}/{pod}/{container} (pods/log) and
// /portForward/{namespace}/{pod} (pods/portforward, SPDY or WebSocket,
// served by the kubelet's own streaming package). The API server does not
// verify a kubelet's certificate unless told to, so a self-signed one does.
type kubeletServer struct {
	srv  *http.Server
	done chan error

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func serveKubelet(addr string, n *Node) (*kubeletServer, error) {
	ca, err := testca.New("sim kubelet", net.ParseIP(n.opts.IP))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sim node: kubelet API on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.serveLogs)
	mux.HandleFunc("/portForward/{namespace}/{pod}", n.servePortForward)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	s := &kubeletServer{done: make(chan error, 1), conns: map[net.Conn]struct{}{}}
	s.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{ca.Serving}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// Port-forward connections are hijacked: Shutdown does not see
		// them, so the server tracks them to close them on Close.
		ConnState: s.track,
	}
	go func() { s.done <- s.srv.ServeTLS(ln, "", "") }()
	return s, nil
}

func (s *kubeletServer) track(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateNew, http.StateHijacked:
		s.conns[c] = struct{}{}
	case http.StateClosed:
		delete(s.conns, c)
	}
}

// Close stops the server and cuts open port-forwards.
func (s *kubeletServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// serveLogs answers pods/log from the sim kubelet's log buffers: the
// current container or, with previous=true, the last terminated one;
// sinceTime and sinceSeconds drop older lines. follow is not streamed: the
// log so far is returned.
func (n *Node) serveLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	previous, _ := strconv.ParseBool(q.Get("previous"))
	var since time.Time
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			http.Error(w, fmt.Sprintf("sinceTime %q: %v", v, err), http.StatusBadRequest)
			return
		}
		since = t
	}
	if v := q.Get("sinceSeconds"); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil {
			http.Error(w, fmt.Sprintf("sinceSeconds %q: %v", v, err), http.StatusBadRequest)
			return
		}
		since = time.Now().Add(-time.Duration(s) * time.Second)
	}
	if _, ok := n.kubel.Get(ns, pod); !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", pod), http.StatusNotFound)
		return
	}
	text, err := n.kubel.Logs(ns, pod, container, previous, since)
	if err != nil {
		// The kubelet answers a missing previous instance with 400.
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if v := q.Get("limitBytes"); v != "" {
		if limit, err := strconv.Atoi(v); err == nil && limit >= 0 && limit < len(text) {
			text = text[:limit]
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, text)
}

// servePortForward serves pods/portforward with the kubelet's own handler;
// each forwarded stream is a TCP connection to the Pod IP.
func (n *Node) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	st, ok := n.kubel.Get(ns, name)
	if !ok {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, podForwarder{n: n, namespace: ns}, name, st.UID, opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// podForwarder dials a port of a Pod on its IP.
type podForwarder struct {
	n         *Node
	namespace string
}

func (f podForwarder) PortForward(ctx context.Context, name, uid string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	st, ok := f.n.kubel.Get(f.namespace, name)
	if !ok || st.UID != uid {
		return fmt.Errorf("pod %s/%s (uid %s) is not running on this node", f.namespace, name, uid)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(st.IP, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside namespace of pod %s: %w", port, name, err)
	}
	defer conn.Close()
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, stream)
		if cw, ok := conn.(*net.TCPConn); ok {
			cw.CloseWrite()
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		errc <- err
	}()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return err
}
