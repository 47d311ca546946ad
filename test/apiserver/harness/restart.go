package harness

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/gpustack/routing-conformance/sim/apiserver/testca"
)

// stableIdentity prepares what lets the API server restart under its
// clients: a serving certificate for 127.0.0.1 from a test CA, a static
// token in system:masters (--token-auth-file), and the front's address. It
// returns the client config for both.
func (c *Cluster) stableIdentity(dir string) (*rest.Config, error) {
	ca, err := testca.New("kube-apiserver", net.IPv4(127, 0, 0, 1))
	if err != nil {
		return nil, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b[:])
	// The serving pair goes into --cert-dir under the names the API server
	// looks for there (apiserver.crt/.key), not --tls-cert-file: the test
	// server points its peer-proxy CA at <cert-dir>/apiserver.crt, which
	// must exist.
	certDir := filepath.Join(dir, "serving")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return nil, err
	}
	files := map[string][]byte{
		filepath.Join(certDir, "apiserver.crt"): ca.CertPEM,
		filepath.Join(certDir, "apiserver.key"): ca.KeyPEM,
		// token,user,uid,"groups"
		filepath.Join(dir, "tokens.csv"): []byte(token + `,rc-admin,rc-admin,"system:masters"` + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return nil, err
		}
	}
	c.flags = append(c.flags, "--cert-dir="+certDir, "--token-auth-file="+filepath.Join(dir, "tokens.csv"))
	f, err := newFront()
	if err != nil {
		return nil, err
	}
	c.front = f
	c.onStop(f.close)
	return &rest.Config{
		Host: "https://" + f.addr(), BearerToken: token, QPS: 1000, Burst: 10000,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CABundle},
	}, nil
}

// front is a TCP forwarder on a fixed loopback port to the current API
// server; with none, it refuses (closes) every connection, as a stopped
// server's address does.
type front struct {
	ln   net.Listener
	done chan struct{}

	mu      sync.Mutex
	backend string
	conns   map[net.Conn]struct{}
}

func newFront() (*front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("API server front: %w", err)
	}
	f := &front{ln: ln, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go f.serve()
	return f, nil
}

func (f *front) addr() string { return f.ln.Addr().String() }

// point sends new connections to backend ("": none) and cuts the open ones,
// which belonged to the previous server.
func (f *front) point(backend string) {
	f.mu.Lock()
	f.backend = backend
	conns := f.conns
	f.conns = map[net.Conn]struct{}{}
	f.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

func (f *front) serve() {
	defer close(f.done)
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.relay(conn)
	}
}

func (f *front) relay(client net.Conn) {
	f.mu.Lock()
	backend := f.backend
	f.mu.Unlock()
	if backend == "" {
		client.Close()
		return
	}
	server, err := net.Dial("tcp", backend)
	if err != nil {
		client.Close()
		return
	}
	f.mu.Lock()
	if f.backend != backend {
		f.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	f.conns[client], f.conns[server] = struct{}{}, struct{}{}
	f.mu.Unlock()
	copied := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		copied <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-copied
	client.Close()
	server.Close()
	<-copied
	f.mu.Lock()
	delete(f.conns, client)
	delete(f.conns, server)
	f.mu.Unlock()
}

// close stops accepting and cuts every connection.
func (f *front) close() {
	err := f.ln.Close()
	<-f.done
	f.point("")
	if err != nil && !errors.Is(err, net.ErrClosed) {
		fmt.Fprintf(os.Stderr, "harness: API server front: %v\n", err)
	}
}
