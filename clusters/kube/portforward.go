package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	corev1 "k8s.io/api/core/v1"

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

// localProxy is a stable 127.0.0.1 listener that behaves, for a client
// outside the cluster, as the <md>-router Service does for one inside it:
// each new connection goes to a Ready, not terminating router Pod drawn at
// random (kube-proxy's iptables mode; see sim/service for the
// sources), through a port-forward tunnel to that Pod, and keeps it for its
// life. A rollout or a deleted router Pod is followed on the next
// connection; connections already made end when their Pod closes them, as
// conntracked ones do. `kubectl port-forward svc/<md>-router` would not do:
// it resolves the Service to one Pod once and dies with it.
type localProxy struct {
	ln      net.Listener
	pick    func(ctx context.Context) (pod string, live []string, err error)
	forward func(ctx context.Context, pod string) (Tunnel, error)
	logf    func(string, ...any)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	tunnels map[string]Tunnel // by Pod name
	conns   map[net.Conn]net.Conn
	closing bool
}

func newLocalProxy(pick func(ctx context.Context) (pod string, live []string, err error), forward func(ctx context.Context, pod string) (Tunnel, error),
	logf func(string, ...any)) (*localProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("local listener for the port-forward: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &localProxy{ln: ln, pick: pick, forward: forward, logf: logf, ctx: ctx, cancel: cancel,
		tunnels: map[string]Tunnel{}, conns: map[net.Conn]net.Conn{}}
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

// tunnel returns the live tunnel to pod, opening one when there is none or
// the last one dropped.
func (p *localProxy) tunnel(pod string) (Tunnel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return nil, errors.New("port-forward closed")
	}
	if t := p.tunnels[pod]; t != nil {
		select {
		case <-t.Done():
			t.Close()
			delete(p.tunnels, pod)
		default:
			return t, nil
		}
	}
	t, err := p.forward(p.ctx, pod)
	if err != nil {
		return nil, err
	}
	p.tunnels[pod] = t
	return t, nil
}

// drop forgets pod's tunnel t (if still current) so the next connection
// reopens it.
func (p *localProxy) drop(pod string, t Tunnel) {
	p.mu.Lock()
	if p.tunnels[pod] == t {
		delete(p.tunnels, pod)
	}
	p.mu.Unlock()
	t.Close()
}

// prune closes the tunnels to Pods that are gone (their streams fail).
func (p *localProxy) prune(live []string) {
	p.mu.Lock()
	var gone []Tunnel
	for pod, t := range p.tunnels {
		if !slices.Contains(live, pod) {
			gone = append(gone, t)
			delete(p.tunnels, pod)
		}
	}
	p.mu.Unlock()
	for _, t := range gone {
		t.Close()
	}
}

// dial picks a router Pod for one new connection and dials through its
// tunnel; a tunnel that dropped under us is reopened once.
func (p *localProxy) dial() (net.Conn, error) {
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		pod, live, err := p.pick(p.ctx)
		if err != nil {
			return nil, err
		}
		p.prune(live)
		t, err := p.tunnel(pod)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		c, err := d.DialContext(p.ctx, "tcp", t.Addr())
		if err == nil {
			return c, nil
		}
		last = err
		p.drop(pod, t)
	}
	return nil, last
}

func (p *localProxy) handle(client net.Conn) {
	defer client.Close()
	upstream, err := p.dial()
	if err != nil {
		p.logf("kube: port-forward: %v", err)
		return
	}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		upstream.Close()
		return
	}
	p.conns[client] = upstream
	p.mu.Unlock()
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

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

func (p *localProxy) close() {
	p.mu.Lock()
	p.closing = true
	tunnels := p.tunnels
	p.tunnels = map[string]Tunnel{}
	var conns []net.Conn
	for c, up := range p.conns {
		conns = append(conns, c, up)
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.cancel()
	for _, c := range conns {
		_ = c.Close()
	}
	for _, t := range tunnels {
		t.Close()
	}
	p.wg.Wait()
}

// OpenAIBaseURL is the router's OpenAI base URL ending in /v1: the in-cluster
// Service (http://<md>-router.<ns>.svc:8081/v1) when the suite runs in a Pod,
// otherwise a stable loopback URL that spreads connections over the Ready
// router Pods as the Service does (localProxy), through port-forwards.
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
		p, err := newLocalProxy(d.pickRouterPod, d.forwardRouter, d.c.logf)
		if err != nil {
			return "", err
		}
		d.proxy = p
	}
	return "http://" + d.proxy.Addr() + "/v1", nil
}

// pickRouterPod draws one of the router Pods the Service would send a new
// connection to: Ready and not terminating, else (none Ready) serving
// terminating ones, at random. live lists every router Pod that exists.
func (d *Deployment) pickRouterPod(ctx context.Context) (pod string, live []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.c.iv.PortForward)
	defer cancel()
	pods, err := d.pods(ctx, routerSelector(d.name, d.router()))
	if err != nil {
		return "", nil, err
	}
	var ready, terminating []string
	for i := range pods {
		p := &pods[i]
		live = append(live, p.Name)
		serving := p.Status.Phase == corev1.PodRunning && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		switch {
		case !serving:
		case p.DeletionTimestamp == nil:
			ready = append(ready, p.Name)
		default:
			terminating = append(terminating, p.Name)
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	if len(ready) == 0 {
		return "", live, fmt.Errorf("no Ready router Pod for %s/%s (%s)", d.ns, d.name, routerSelector(d.name, d.router()))
	}
	return ready[rand.IntN(len(ready))], live, nil
}

// forwardRouter opens a port-forward to pod's 8081.
func (d *Deployment) forwardRouter(ctx context.Context, pod string) (Tunnel, error) {
	ctx, cancel := context.WithTimeout(ctx, d.c.iv.PortForward)
	defer cancel()
	t, err := d.c.fwd.Forward(ctx, d.ns, pod, api.RouterHTTPPort)
	if err != nil {
		return nil, err
	}
	d.c.logf("kube: port-forward %s -> %s/%s:%d", t.Addr(), d.ns, pod, api.RouterHTTPPort)
	return t, nil
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
