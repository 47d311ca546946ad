package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/gpustack/routing-conformance/api"
)

// Forwarder opens a tunnel from a local address to a port of a Pod, what
// `kubectl port-forward` does. Tests substitute a loopback fake that can drop.
type Forwarder interface {
	Forward(ctx context.Context, namespace, pod string, port int) (Tunnel, error)
}

// Tunnel is one open forward.
type Tunnel interface {
	// Addr is the local host:port that reaches the Pod's port.
	Addr() string
	// Done is closed when the tunnel has dropped (Pod gone, API server
	// connection lost) or was closed.
	Done() <-chan struct{}
	Close()
}

// NewSPDYForwarder forwards through the API server's pods/portforward
// subresource with client-go's tools/portforward over transport/spdy.
func NewSPDYForwarder(cfg *rest.Config, kube kubernetes.Interface) Forwarder {
	return &spdyForwarder{cfg: cfg, kube: kube}
}

type spdyForwarder struct {
	cfg  *rest.Config
	kube kubernetes.Interface
}

func (f *spdyForwarder) Forward(ctx context.Context, ns, pod string, port int) (Tunnel, error) {
	transport, upgrader, err := spdy.RoundTripperFor(f.cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	}
	url := f.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	// The tunnel outlives the call that opened it; it ends with Close.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesWithContext(fctx, dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, ready, io.Discard, io.Discard)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	}
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(done)
		errc <- pf.ForwardPorts()
	}()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		return nil, fmt.Errorf("port-forward to %s/%s:%d: %v", ns, pod, port, err)
	case <-ctx.Done():
		cancel()
		<-done
		return nil, fmt.Errorf("port-forward to %s/%s:%d: %w", ns, pod, port, ctx.Err())
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) == 0 {
		cancel()
		<-done
		return nil, fmt.Errorf("port-forward to %s/%s:%d: no local port: %v", ns, pod, port, err)
	}
	return &spdyTunnel{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), done: done, cancel: cancel}, nil
}

type spdyTunnel struct {
	addr   string
	done   chan struct{}
	cancel context.CancelFunc
}

func (t *spdyTunnel) Addr() string          { return t.addr }
func (t *spdyTunnel) Done() <-chan struct{} { return t.done }
func (t *spdyTunnel) Close() {
	t.cancel()
	<-t.done
}

// localProxy is a stable 127.0.0.1 listener in front of a port-forward. Each
// accepted connection goes through the current tunnel; a tunnel that dropped
// (router Pod replaced, API server hiccup) is reopened to a freshly picked
// Pod, so the URL the specs hold stays valid for the deployment's life.
type localProxy struct {
	ln      net.Listener
	open    func(ctx context.Context) (Tunnel, error)
	logf    func(string, ...any)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	tunnel  Tunnel
	conns   map[net.Conn]proxied
	closing bool
}

func newLocalProxy(open func(ctx context.Context) (Tunnel, error), logf func(string, ...any)) (*localProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("local listener for the port-forward: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &localProxy{ln: ln, open: open, logf: logf, ctx: ctx, cancel: cancel, conns: map[net.Conn]proxied{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *localProxy) Addr() string { return p.ln.Addr().String() }

func (p *localProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

// current returns the live tunnel, opening a new one when there is none or
// the last one dropped.
func (p *localProxy) current() (Tunnel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return nil, errors.New("port-forward closed")
	}
	if t := p.tunnel; t != nil {
		select {
		case <-t.Done():
			t.Close()
			p.tunnel = nil
		default:
			return t, nil
		}
	}
	t, err := p.open(p.ctx)
	if err != nil {
		return nil, err
	}
	p.tunnel = t
	return t, nil
}

// drop forgets t (if still current) so the next connection reopens.
func (p *localProxy) drop(t Tunnel) {
	p.mu.Lock()
	if p.tunnel == t {
		p.tunnel = nil
	}
	p.mu.Unlock()
	t.Close()
}

func (p *localProxy) handle(client net.Conn) {
	defer client.Close()
	var upstream net.Conn
	for attempt := 0; attempt < 2 && upstream == nil; attempt++ {
		t, err := p.current()
		if err != nil {
			p.logf("kube: port-forward: %v", err)
			return
		}
		var d net.Dialer
		c, err := d.DialContext(p.ctx, "tcp", t.Addr())
		if err != nil {
			// The tunnel's listener is gone: it dropped under us. Reopen once.
			p.drop(t)
			continue
		}
		upstream = c
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			upstream.Close()
			return
		}
		p.conns[client] = proxied{tunnel: t, upstream: upstream}
		p.mu.Unlock()
	}
	if upstream == nil {
		return
	}
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
	}()
	// Like tools/portforward: the exchange is over when the remote side is
	// done; a local error ends it early.
	remoteDone := make(chan struct{})
	localDone := make(chan struct{})
	go func() {
		defer close(remoteDone)
		_, _ = io.Copy(client, upstream)
	}()
	go func() {
		defer close(localDone)
		if _, err := io.Copy(upstream, client); err != nil {
			_ = upstream.Close()
			return
		}
		closeWrite(upstream)
	}()
	<-remoteDone
	_ = client.Close()
	_ = upstream.Close()
	<-localDone
}

// proxied is one client connection's upstream and the tunnel it uses.
type proxied struct {
	tunnel   Tunnel
	upstream net.Conn
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

// reset closes the current tunnel and the connections through it, so the
// next request reaches a freshly picked Pod (after a router rollout).
func (p *localProxy) reset() {
	p.mu.Lock()
	t := p.tunnel
	p.tunnel = nil
	var victims []net.Conn
	for c, pc := range p.conns {
		if pc.tunnel == t {
			victims = append(victims, c, pc.upstream)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		_ = c.Close()
	}
	if t != nil {
		t.Close()
	}
}

func (p *localProxy) close() {
	p.mu.Lock()
	p.closing = true
	t := p.tunnel
	p.tunnel = nil
	var conns []net.Conn
	for c, pc := range p.conns {
		conns = append(conns, c, pc.upstream)
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.cancel()
	for _, c := range conns {
		_ = c.Close()
	}
	if t != nil {
		t.Close()
	}
	p.wg.Wait()
}

// OpenAIBaseURL is the router's OpenAI base URL ending in /v1: the in-cluster
// Service (http://<md>-router.<ns>.svc:8081/v1) when the suite runs in a Pod,
// otherwise a stable loopback URL in front of a port-forward to a Ready
// router Pod's 8081 that reconnects when the Pod changes.
func (d *Deployment) OpenAIBaseURL(ctx context.Context) (string, error) {
	if d.router() == "" {
		return "", fmt.Errorf("ModelDeployment %s/%s declares no router; this suite sends traffic through the router only", d.ns, d.name)
	}
	if d.c.inCluster {
		return fmt.Sprintf("http://%s-router.%s.svc:%d/v1", d.name, d.ns, api.RouterHTTPPort), nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.proxy == nil {
		if d.c.fwd == nil {
			return "", fmt.Errorf("no port-forwarder configured for %s/%s", d.ns, d.name)
		}
		p, err := newLocalProxy(d.openTunnel, d.c.logf)
		if err != nil {
			return "", err
		}
		d.proxy = p
	}
	return "http://" + d.proxy.Addr() + "/v1", nil
}

// openTunnel forwards to 8081 of the newest Ready router Pod.
func (d *Deployment) openTunnel(ctx context.Context) (Tunnel, error) {
	ctx, cancel := context.WithTimeout(ctx, d.c.iv.PortForward)
	defer cancel()
	pods, err := d.routerPods(ctx)
	if err != nil {
		return nil, err
	}
	var pick string
	var newest int64
	for i := range pods {
		p := &pods[i]
		if !podReady(p) {
			continue
		}
		if ts := p.CreationTimestamp.UnixNano(); pick == "" || ts > newest {
			pick, newest = p.Name, ts
		}
	}
	if pick == "" {
		return nil, fmt.Errorf("no Ready router Pod for %s/%s (%s)", d.ns, d.name, routerSelector(d.name, d.router()))
	}
	t, err := d.c.fwd.Forward(ctx, d.ns, pick, api.RouterHTTPPort)
	if err != nil {
		return nil, err
	}
	d.c.logf("kube: port-forward %s -> %s/%s:%d", t.Addr(), d.ns, pick, api.RouterHTTPPort)
	return t, nil
}

func (d *Deployment) resetProxy() {
	d.mu.Lock()
	p := d.proxy
	d.mu.Unlock()
	if p != nil {
		p.reset()
	}
}

func (d *Deployment) closeProxy() {
	d.mu.Lock()
	p := d.proxy
	d.proxy = nil
	d.mu.Unlock()
	if p != nil {
		p.close()
	}
}
