package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/programs"
)

// EPPOptions say how the built EPP finds its engines and Services.
type EPPOptions struct {
	// Kubeconfig, when set, is a real Kubernetes API's (the API-server
	// tier): the EPP discovers through it with the rendered selector.
	// Empty: the file-discovery row, fed from the container's Pods watcher.
	Kubeconfig string
	// PodKubeconfig, when set, stands in for Kubeconfig per Pod: it writes
	// a kubeconfig for the Pod's own identity into dir and returns its
	// path, as a kubelet projects the Pod's ServiceAccount token (the
	// API-server tier mints one through the TokenRequest API).
	PodKubeconfig func(ctx context.Context, pod proc.PodInfo, dir string) (string, error)
	// Resolve maps a Service's port to a Ready Pod's address, for the
	// cluster-dns row's proxy.
	Resolve programs.ResolveService
	// Started, when set, is told each process's start.
	Started func(Start)
}

// The epp container's ports, as the operator renders them.
var eppPodPorts = struct{ grpc, health, metrics int }{operator.EPPGRPCPort, operator.EPPHealthPort, 9090}

// EPPProgram is the proc.Main that runs the built EPP as the llm-d router
// Pod's epp container: the container translated by EPPTranslations, the
// process's output as the container's log, its exit code as the
// container's. Cancelling ctx is SIGTERM to its process group; c.Killed is
// SIGKILL.
func (in *EPPInstall) EPPProgram(opts EPPOptions) proc.Main {
	return func(ctx context.Context, c *proc.Container) int {
		code, err := in.run(ctx, c, opts)
		if err != nil {
			fmt.Fprintf(c.Stderr, "sim: epp: %v\n", err)
			return 128
		}
		return code
	}
}

func (in *EPPInstall) run(ctx context.Context, c *proc.Container, opts EPPOptions) (int, error) {
	loopback, err := podLoopback(c)
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "epp-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := writeMounts(c.Files, filepath.Join(dir, "mounts")); err != nil {
		return 0, err
	}
	var config []byte
	if path, ok := RenderedConfigPath(c.Args); ok && c.Files != nil {
		if config, err = fs.ReadFile(c.Files, strings.TrimPrefix(path, "/")); err != nil {
			return 0, fmt.Errorf("the mounted --config-file: %w", err)
		}
	}
	env := EPPEnv{ConfigDir: filepath.Join(dir, "mounts")}
	for _, p := range []*int{&env.GRPCPort, &env.HealthPort, &env.MetricsPort} {
		if *p, err = freePort(); err != nil {
			return 0, err
		}
	}
	if opts.PodKubeconfig != nil {
		if opts.Kubeconfig, err = opts.PodKubeconfig(ctx, c.Pod, dir); err != nil {
			return 0, fmt.Errorf("the Pod's ServiceAccount credentials: %w", err)
		}
	}
	var pods *podFile
	if opts.Kubeconfig == "" {
		if c.Pods == nil {
			return 0, errors.New("the container has no Pods watcher to write the discovery file from, and no kubeconfig was given")
		}
		env.EndpointsFile = filepath.Join(dir, "endpoints.yaml")
		if pods, err = newPodFile(c, env.EndpointsFile); err != nil {
			return 0, err
		}
		stop := pods.follow()
		defer stop()
	}
	proxy, err := serviceProxy(c, opts.Resolve)
	if err != nil {
		return 0, err
	}
	defer proxy.Close()
	env.Proxy = "http://" + proxy.Addr().String()

	plan, err := TranslateEPP(c.Args, config, env)
	if err != nil {
		return 0, err
	}
	if path, ok := RenderedConfigPath(c.Args); ok {
		if err := os.WriteFile(filepath.Join(env.ConfigDir, strings.TrimPrefix(path, "/")), plan.Config, 0o644); err != nil {
			return 0, err
		}
	}
	penv := plan.Env
	if opts.Kubeconfig != "" {
		penv["KUBECONFIG"] = opts.Kubeconfig
	}
	cmd := exec.Command(in.Binary, plan.Args...)
	cmd.Env = processEnv(c.Env, penv)
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", in.Binary, err)
	}
	if opts.Started != nil {
		opts.Started(Start{Pod: c.Pod.Name, PID: cmd.Process.Pid, Command: append([]string{in.Binary}, plan.Args...), Translations: plan.Rows})
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var closers []io.Closer
	keep := func(cl io.Closer) {
		mu.Lock()
		closers = append(closers, cl)
		mu.Unlock()
	}
	for _, fw := range [][2]int{{eppPodPorts.grpc, env.GRPCPort}, {eppPodPorts.health, env.HealthPort}} {
		wg.Add(1)
		go func(podPort, port int) {
			defer wg.Done()
			if ln := tcpFront(c, hostPort(loopback, port), podPort, exited); ln != nil {
				keep(ln)
			}
		}(fw[0], fw[1])
	}
	obs := &eppObserver{c: c, backend: hostPort(loopback, env.MetricsPort), boot: time.Now(),
		client: &http.Client{Timeout: observerTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2}}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		wrap := func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == operator.ObserverPath {
					obs.ServeHTTP(w, r)
					return
				}
				h.ServeHTTP(w, r)
			})
		}
		if srv := front(c, hostPort(loopback, env.MetricsPort), eppPodPorts.metrics, exited, nil, nil, wrap); srv != nil {
			keep(srv)
		}
	}()

	signal := func(sig syscall.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig) }
	select {
	case <-exited:
	case <-c.Killed:
		signal(syscall.SIGKILL)
	case <-ctx.Done():
		signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-c.Killed:
			signal(syscall.SIGKILL)
		}
	}
	<-exited
	signal(syscall.SIGKILL)
	wg.Wait()
	for _, cl := range closers {
		_ = cl.Close()
	}
	return exitCode(waitErr)
}

// writeMounts copies the container's mounted files under dir.
func writeMounts(fsys fs.FS, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if fsys == nil {
		return nil
	}
	return fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// freePort is a TCP port free on every interface, as the EPP binds it.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("a free port for the EPP: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tcpFront serves the Pod IP's podPort, once the process has bound
// backend, as a TCP forward to it, until the process exits.
func tcpFront(c *proc.Container, backend string, podPort int, exited <-chan struct{}) net.Listener {
	if !awaitBound(backend, exited) {
		return nil
	}
	ln, err := c.Listen(":" + strconv.Itoa(podPort))
	if err != nil {
		fmt.Fprintf(c.Stderr, "sim: epp: serve the Pod's port %d: %v\n", podPort, err)
		return nil
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				up, err := net.DialTimeout("tcp", backend, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, conn); _ = up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				go func() { _, _ = io.Copy(conn, up); closeWrite(conn); done <- struct{}{} }()
				select {
				case <-done:
					<-done
				case <-exited:
				}
			}()
		}
	}()
	go func() { <-exited; _ = ln.Close() }()
	return ln
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// serviceProxy is the cluster-dns row's HTTP proxy on the Pod's loopback:
// requests for <svc>.<ns>.svc go to a Ready Pod of the Service; any other
// host is refused (the process sends loopback addresses direct).
func serviceProxy(c *proc.Container, resolve programs.ResolveService) (net.Listener, error) {
	ln, err := c.Listen("127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the cluster-dns proxy on the Pod's loopback: %w", err)
	}
	if resolve == nil {
		resolve = func(context.Context, string, string, string) (string, error) {
			return "", errors.New("this sim resolves no Service names")
		}
	}
	client := programs.ServiceClient(resolve)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.Host = r.In.Host },
		Transport:     client.Transport,
		FlushInterval: -1,
	}
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := programs.ServiceName(r.URL.Hostname()); !r.URL.IsAbs() || !ok {
			http.Error(w, "sim cluster-dns proxy: only <svc>.<ns>.svc URLs are proxied", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	return ln, nil
}

// fileEndpoint is one entry of the file-discovery file
// (llm-d/llm-d-router@71f4f099:pkg/epp/framework/plugins/datalayer/discovery/file/plugin.go).
type fileEndpoint struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Address   string            `json:"address"`
	Port      string            `json:"port"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// podFile writes the file-discovery file from the Pods the rendered
// selector matches.
type podFile struct {
	c        *proc.Container
	path     string
	ns       string
	selector labels.Selector
	ports    []string

	mu      sync.Mutex
	last    []byte
	current map[string]fileEndpoint // by endpoint name
}

func newPodFile(c *proc.Container, path string) (*podFile, error) {
	t := &translating{args: parseArgs(c.Args)}
	sel, ok := t.value("--endpoint-selector")
	if !ok {
		return nil, errors.New("no --endpoint-selector rendered to discover by")
	}
	selector, err := labels.Parse(sel)
	if err != nil {
		return nil, fmt.Errorf("--endpoint-selector=%s: %w", sel, err)
	}
	portsFlag, _ := t.value("--endpoint-target-ports")
	var ports []string
	for _, p := range strings.Split(portsFlag, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return nil, errors.New("no --endpoint-target-ports rendered")
	}
	ns := c.Env["NAMESPACE"]
	if ns == "" {
		ns = c.Pod.Namespace
	}
	f := &podFile{c: c, path: path, ns: ns, selector: selector, ports: ports}
	return f, f.write()
}

// follow rewrites the file on every Pod change until stopped.
func (f *podFile) follow() func() {
	ch, cancel := f.c.Pods.Watch()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				if err := f.write(); err != nil {
					fmt.Fprintf(f.c.Stderr, "sim: epp: the discovery file: %v\n", err)
				}
			}
		}
	}()
	return func() { close(done); cancel() }
}

// write writes the endpoints the Pod reconciler would admit, by rename,
// when they changed.
func (f *podFile) write() error {
	var eps []fileEndpoint
	current := map[string]fileEndpoint{}
	for _, p := range f.c.Pods.List(f.ns, nil) {
		if !p.Ready || p.Deleting || p.IP == "" || !f.selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		for i, port := range f.ports {
			e := fileEndpoint{Name: p.Name + "-rank-" + strconv.Itoa(i), Namespace: p.Namespace, Address: p.IP, Port: port, Labels: p.Labels}
			eps = append(eps, e)
			current[e.Name] = e
		}
	}
	slices.SortFunc(eps, func(a, b fileEndpoint) int { return strings.Compare(a.Name, b.Name) })
	if eps == nil {
		eps = []fileEndpoint{}
	}
	b, err := yaml.Marshal(map[string]any{"endpoints": eps})
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last != nil && string(b) == string(f.last) {
		return nil
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return err
	}
	f.last, f.current = b, current
	return nil
}

// eppObserver serves the operator's GET /observer/endpoints (its llm-d
// patch, which the built EPP lacks) from what the process reports: the
// endpoints of its datastore, one llm_d_epp_per_endpoint_queue_size series
// each on its /metrics, joined with the Pods they name. The view is
// emulated; the membership in it is the EPP's.
type eppObserver struct {
	c       *proc.Container
	backend string
	boot    time.Time
	client  *http.Client
}

// perEndpointGauge is the EPP's per-endpoint series
// (llm-d/llm-d-router@71f4f099:pkg/epp/metrics/collectors/inference_pool.go).
const perEndpointGauge = "llm_d_epp_per_endpoint_queue_size"

func (o *eppObserver) ServeHTTP(w http.ResponseWriter, r *http.Request) { serveView(w, r, o.view) }

func (o *eppObserver) view(ctx context.Context) (operator.ObserverDocument, error) {
	var doc operator.ObserverDocument
	doc.Router.BootGeneration = o.boot.UnixMilli()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.backend+"/metrics", nil)
	if err != nil {
		return doc, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return doc, fmt.Errorf("the EPP's /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return doc, fmt.Errorf("the EPP's /metrics answered %s: %v", resp.Status, err)
	}
	samples, err := familySamples(o.backend, body, perEndpointGauge)
	if err != nil {
		return doc, err
	}
	pods := map[string]proc.Pod{}
	for _, p := range o.c.Pods.List("", nil) {
		pods[p.Namespace+"/"+p.Name] = p
	}
	doc.Workers = []operator.ObserverWorker{}
	for _, s := range samples {
		name := s.Labels["model_server_endpoint"]
		podName, rank, ok := strings.Cut(name, "-rank-")
		if !ok {
			continue
		}
		var p proc.Pod
		found := false
		for _, cand := range pods {
			if cand.Name == podName {
				p, found = cand, true
			}
		}
		if !found {
			continue
		}
		port := o.port(rank)
		ow := operator.ObserverWorker{URL: "http://" + net.JoinHostPort(p.IP, port), Port: operator.ObserverPortValue(port),
			Role: p.Labels["app.kubernetes.io/component"], PodHint: p.Name, WorkerID: p.Namespace + "/" + name}
		ow.Selection = operator.ObserverSelection{Registered: true, Healthy: true, InSelection: true}
		doc.Workers = append(doc.Workers, ow)
	}
	slices.SortFunc(doc.Workers, func(a, b operator.ObserverWorker) int { return strings.Compare(a.WorkerID, b.WorkerID) })
	doc.Router.NowMS = time.Now().UnixMilli()
	return doc, nil
}

// port is the target port of rank (the i-th of --endpoint-target-ports).
func (o *eppObserver) port(rank string) string {
	t := &translating{args: parseArgs(o.c.Args)}
	v, _ := t.value("--endpoint-target-ports")
	ports := strings.Split(v, ",")
	i, err := strconv.Atoi(rank)
	if err != nil || i < 0 || i >= len(ports) {
		return ""
	}
	return strings.TrimSpace(ports[i])
}
