package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gpustack/routing-conformance/sim/proc"
)

// Options say which Kubernetes API a router's discovery reads.
type Options struct {
	// Kubeconfig, when set, is the kubeconfig of a real Kubernetes API
	// (the API-server tier). Empty: the container serves the sim's Pods
	// API from its Pods watcher (the kube-api row). Either way the process
	// gets it as KUBECONFIG and discovers workers by the rendered
	// selectors itself.
	Kubeconfig string
	// Started, when set, is told each process's start.
	Started func(Start)
}

// Start is one router process as it was started.
type Start struct {
	Pod     string
	PID     int
	Command []string
	// Translations are the table rows that changed the argv.
	Translations []string
}

// pollBound is how often the kubelet side looks for the process's ports.
const pollBound = 20 * time.Millisecond

// Program is the proc.Main that runs router's built binary as the
// router container: the argv translated by Translations, the process's
// output as the container's log, its exit code as the container's. It
// serves the Pod IP's HTTP and metrics ports once the process has bound
// them on the Pod's loopback, through the Pod's HTTP faults. Cancelling
// ctx is SIGTERM to the process group; c.Killed is SIGKILL.
func (in *Install) Program(router string, opts Options) proc.Main {
	return func(ctx context.Context, c *proc.Container) int {
		code, err := in.run(ctx, c, router, opts)
		if err != nil {
			// The sim could not start the process: say why where a user
			// looks, the container log, as a runtime's start error would be.
			fmt.Fprintf(c.Stderr, "sim: router %s: %v\n", router, err)
			return 128
		}
		return code
	}
}

func (in *Install) run(ctx context.Context, c *proc.Container, router string, opts Options) (int, error) {
	loopback, err := podLoopback(c)
	if err != nil {
		return 0, err
	}
	hub, err := closedHub(c)
	if err != nil {
		return 0, err
	}
	defer hub.Close()
	env := Env{Router: router, Loopback: loopback, Vocab: in.TiktokenEncodingsBase,
		HubEndpoint: "http://" + hub.Addr().String(), HubHome: filepath.Join(in.Dir, "hf-home"), Kubeconfig: opts.Kubeconfig}
	if opts.Kubeconfig == "" {
		if c.Pods == nil {
			return 0, errors.New("the container has no Pods watcher to serve the sim's Pods API from, and no kubeconfig was given")
		}
		dir, err := os.MkdirTemp("", "router-kubeapi-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		// Served until the process has exited, after ctx's SIGTERM too.
		kubeconfig, stop, err := servePodAPI(context.Background(), c, dir)
		if err != nil {
			return 0, err
		}
		defer stop()
		env.Kubeconfig = kubeconfig
	}
	plan, err := Translate(c.Args, env)
	if err != nil {
		return 0, err
	}
	command, err := in.Command(router)
	if err != nil {
		return 0, err
	}
	httpPort, metricsPort, err := servedPorts(plan.Args)
	if err != nil {
		return 0, err
	}

	cmd := exec.Command(command[0], append(command[1:], plan.Args...)...)
	cmd.Env = processEnv(c.Env, plan.Env)
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	// Its own process group, so SIGTERM and SIGKILL reach whatever the
	// binary starts; and killed with the suite if the suite dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", command[0], err)
	}
	if opts.Started != nil {
		opts.Started(Start{Pod: c.Pod.Name, PID: cmd.Process.Pid, Command: append(command, plan.Args...), Translations: plan.Rows})
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	// terminated is closed when the process is sent SIGTERM: both routers
	// then shut their HTTP server down gracefully (stop accepting, close
	// idle connections, finish what is in flight), and the front on the
	// Pod IP, which stands in for the process's own listener, does too.
	terminated := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fronts []*http.Server
	serve := func(port int, before func(backend string) error, wrap func(http.Handler) http.Handler, drain <-chan struct{}) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if srv := front(c, hostPort(loopback, port), port, exited, drain, before, wrap); srv != nil {
				mu.Lock()
				fronts = append(fronts, srv)
				mu.Unlock()
			}
		}()
	}
	metricsBackend := ""
	if metricsPort != 0 {
		metricsBackend = hostPort(loopback, metricsPort)
	}
	obs := newObserver(router, hostPort(loopback, httpPort), metricsBackend, time.Now())
	// The operator's observer view is served on the HTTP port (observer.go),
	// unless the binary was built with patches (the operator's include the
	// route, and the binary answers it itself).
	wrap := func(h http.Handler) http.Handler { return withObserver(obs, h) }
	if b, _ := in.Binary(router); len(b.Build.Patches) > 0 {
		wrap = nil
	}
	serve(httpPort, nil, wrap, terminated)
	if metricsPort != 0 {
		// The metrics exporter is a server of its own, which serves until
		// the process exits.
		serve(metricsPort, nil, nil, nil)
	}

	signal := func(sig syscall.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig) }
	select {
	case <-exited:
	case <-c.Killed:
		signal(syscall.SIGKILL)
	case <-ctx.Done():
		signal(syscall.SIGTERM)
		close(terminated)
		select {
		case <-exited:
		case <-c.Killed:
			signal(syscall.SIGKILL)
		}
	}
	<-exited
	signal(syscall.SIGKILL) // whatever the binary left in its group
	wg.Wait()
	for _, srv := range fronts {
		if srv != nil {
			_ = srv.Close()
		}
	}
	return exitCode(waitErr)
}

// exitCode is a process's exit as a container's: its code, or 128 plus the
// signal that killed it, as a shell reports it; an error that is not an
// exit is returned.
func exitCode(waitErr error) (int, error) {
	var exit *exec.ExitError
	if errors.As(waitErr, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	return 0, waitErr
}

// podLoopback is the Pod's private loopback address (what the kubelet
// binds for 127.0.0.1).
func podLoopback(c *proc.Container) (string, error) {
	ln, err := c.Listen("127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("the Pod's loopback address: %w", err)
	}
	defer ln.Close()
	host, _, err := net.SplitHostPort(ln.Addr().String())
	return host, err
}

// closedHub listens on the Pod's loopback and closes every connection it
// accepts: the hub-offline row's stand-in for a hub out of reach.
func closedHub(c *proc.Container) (net.Listener, error) {
	ln, err := c.Listen("127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("a closed hub address on the Pod's loopback: %w", err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	return ln, nil
}

// servedPorts are the HTTP and metrics ports of the translated argv (0:
// no metrics port rendered).
func servedPorts(args []string) (httpPort, metricsPort int, err error) {
	t := &translating{args: parseArgs(args)}
	if _, ok := t.value("--port"); !ok {
		return 0, 0, errors.New("no --port: the operator always renders --port=8081")
	}
	if httpPort, err = t.intValue("--port", 0); err != nil {
		return 0, 0, err
	}
	metricsPort, err = t.intValue("--prometheus-port", 0)
	return httpPort, metricsPort, err
}

// processEnv is the binary's environment: the container's, the host's
// PATH and HOME, and the plan's (KUBECONFIG among them); nothing else of
// the suite's environment leaks in (a user's KUBECONFIG least of all).
func processEnv(container, plan map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, m := range []map[string]string{container, plan} {
		for k, v := range m {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// front serves the Pod IP's port once the process has bound backend (the
// same port on the Pod's loopback, or another: the EPP's) (and before, when set, has returned), proxying
// each request to it (through wrap, when set) behind the Pod's HTTP
// faults, until the process exits, or, once drain is closed, shutting
// down gracefully. It returns nil if the process exits first or before
// fails (said on the container's stderr).
func front(c *proc.Container, backend string, port int, exited, drain <-chan struct{}, before func(backend string) error,
	wrap func(http.Handler) http.Handler) *http.Server {
	if !awaitBound(backend, exited) {
		return nil
	}
	if before != nil {
		if err := before(backend); err != nil {
			fmt.Fprintf(c.Stderr, "sim: upstream: %v\n", err)
			return nil
		}
	}
	ln, err := c.Listen(":" + strconv.Itoa(port))
	if err != nil {
		fmt.Fprintf(c.Stderr, "sim: upstream: serve the Pod's port %d: %v\n", port, err)
		return nil
	}
	target := &url.URL{Scheme: "http", Host: backend}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		// Streams relayed chunk by chunk, as the router writes them.
		FlushInterval: -1,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 1024,
			DisableCompression:  true,
		},
		// The process went away mid-request: the client sees the
		// connection end, as it would with the process itself.
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
		// What the proxy itself saw go wrong (a stream it had to cut) is
		// the sim's, said as such in the container's log.
		ErrorLog: log.New(c.Stderr, "sim: upstream front: ", 0),
	}
	// Full duplex, as the process's own socket is: by default an HTTP/1
	// handler that writes its response closes what it has not read of the
	// request body, and the proxy's last read of it (the check for its
	// end, after the router has answered) then fails the backend
	// connection mid-response.
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
	if wrap != nil {
		h = wrap(h)
	}
	srv := &http.Server{Handler: c.Faults.Handler(port, h), ReadHeaderTimeout: time.Minute,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		select {
		case <-exited:
		case <-drain:
			// As the process's graceful shutdown: no new connection, idle
			// ones closed, in-flight requests finish (or end with it).
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-exited; cancel() }()
			_ = srv.Shutdown(ctx)
			cancel()
		}
		_ = srv.Close()
	}()
	return srv
}

// awaitBound waits until something accepts on backend (true), or the
// process exits first (false).
func awaitBound(backend string, exited <-chan struct{}) bool {
	tick := time.NewTicker(pollBound)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", backend, time.Second)
		if err == nil {
			_ = conn.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-tick.C:
		}
	}
}
