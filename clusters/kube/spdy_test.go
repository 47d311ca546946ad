package kube

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
)

// fakePortForwardServer is the API server's (really the kubelet's) side of
// pods/portforward over SPDY on loopback: it accepts the upgrade, pairs each
// request's error and data streams, and relays the data stream to a backend
// TCP address, as the kubelet relays to the Pod's port. It lets the
// production forwarder (tools/portforward over transport/spdy) run for real.
type fakePortForwardServer struct {
	t       *testing.T
	srv     *httptest.Server
	backend string

	mu    sync.Mutex
	conns []httpstream.Connection
	raw   []net.Conn // every accepted TCP connection, hijacked ones included
	paths []string
	wg    sync.WaitGroup
}

// rawConnListener records each accepted connection: httptest forgets a
// connection once it is hijacked for the SPDY upgrade, so its Close and
// CloseClientConnections never reach them.
type rawConnListener struct {
	net.Listener
	f *fakePortForwardServer
}

func (l rawConnListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.f.mu.Lock()
		l.f.raw = append(l.f.raw, c)
		l.f.mu.Unlock()
	}
	return c, err
}

func newFakePortForwardServer(t *testing.T, backend string) *fakePortForwardServer {
	f := &fakePortForwardServer{t: t, backend: backend}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Listener = rawConnListener{f.srv.Listener, f}
	f.srv.Start()
	t.Cleanup(func() {
		// Stop accepting first, so no connection arrives after dropAll.
		f.srv.Close()
		f.dropAll()
		f.wg.Wait()
	})
	return f
}

type streamAndReply struct {
	s     httpstream.Stream
	reply <-chan struct{}
}

func (f *fakePortForwardServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/portforward") {
		http.Error(w, "not a port-forward", http.StatusNotFound)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
		return
	}
	streams := make(chan streamAndReply, 16)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, reply <-chan struct{}) error {
		streams <- streamAndReply{s, reply}
		return nil
	})
	if conn == nil {
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, conn)
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			select {
			case <-conn.CloseChan():
				return
			case sr := <-streams:
				f.wg.Add(1)
				go func() {
					defer f.wg.Done()
					f.handleStream(conn, sr)
				}()
			}
		}
	}()
}

func (f *fakePortForwardServer) handleStream(conn httpstream.Connection, sr streamAndReply) {
	select {
	case <-sr.reply:
	case <-conn.CloseChan():
		return
	}
	if sr.s.Headers().Get(corev1.StreamType) == corev1.StreamTypeError {
		_ = sr.s.Close() // nothing went wrong: an empty error stream
		return
	}
	up, err := net.Dial("tcp", f.backend)
	if err != nil {
		_ = sr.s.Reset()
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, sr.s)
		_ = up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(sr.s, up)
	_ = sr.s.Close()
	select {
	case <-done:
	case <-conn.CloseChan():
	}
	_ = up.Close()
}

// dropAll closes every upgraded connection and then its TCP connection: the
// API server going away. The SPDY GoAway alone is not enough: spdystream's
// shutdown (with no close timeout) waits until the peer's streams are gone,
// which happens only when the TCP connection ends, so both sides would wait
// on each other and leak their shutdown goroutines.
func (f *fakePortForwardServer) dropAll() {
	f.mu.Lock()
	conns, raw := f.conns, f.raw
	f.conns, f.raw = nil, nil
	f.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	for _, c := range raw {
		_ = c.Close()
	}
}

func (f *fakePortForwardServer) upgrades() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

func TestSPDYForwarderReachesThePodPortAndReportsTheDrop(t *testing.T) {
	backend := echoServer(t, "router")
	pf := newFakePortForwardServer(t, backend.Listener.Addr().String())
	cfg := &rest.Config{Host: pf.srv.URL}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fwd := NewSPDYForwarder(cfg, kube)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tun, err := fwd.Forward(ctx, "rc-x", "md-router-a", 8081)
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	defer tun.Close()
	if got := httpGet(t, "http://"+tun.Addr()+"/v1/models"); got != "router /v1/models" {
		t.Errorf("through the tunnel: %q", got)
	}
	if ups := pf.upgrades(); len(ups) != 1 || ups[0] != "/api/v1/namespaces/rc-x/pods/md-router-a/portforward" {
		t.Errorf("upgrade requests %v", ups)
	}
	pf.dropAll()
	select {
	case <-tun.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the tunnel did not report the lost connection")
	}
}

func TestSPDYForwarderBehindTheProxyReconnects(t *testing.T) {
	backend := echoServer(t, "router")
	pf := newFakePortForwardServer(t, backend.Listener.Addr().String())
	cfg := &rest.Config{Host: pf.srv.URL}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fwd := NewSPDYForwarder(cfg, kube)
	proxy, err := newLocalProxy(func(context.Context) (string, []string, error) { return "md-router-a", []string{"md-router-a"}, nil },
		func(ctx context.Context, pod string) (Tunnel, error) { return fwd.Forward(ctx, "rc-x", pod, 8081) }, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.close()
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	get := func() (string, error) {
		resp, err := client.Get("http://" + proxy.Addr() + "/v1/models")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(); err != nil || got != "router /v1/models" {
		t.Fatalf("first: %q %v", got, err)
	}
	pf.dropAll()
	client.CloseIdleConnections()
	var got string
	eventually(t, "a request after the API server connection dropped", func() bool {
		got, err = get()
		return err == nil
	})
	if got != "router /v1/models" {
		t.Errorf("after the drop: %q", got)
	}
	if n := len(pf.upgrades()); n != 2 {
		t.Errorf("%d port-forward upgrades, want 2", n)
	}
}
