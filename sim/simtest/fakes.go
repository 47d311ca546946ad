// Package simtest holds small stand-in programs (proc.Main) for testing the
// sim's kubelet, operator loop and CLI without the real router and engine
// emulators: an engine that answers /health, /v1/models, /server_info, the
// two OpenAI generation routes and /metrics, and a router that discovers workers by
// label through proc.PodWatcher, proxies round robin, serves
// /observer/endpoints and exits 2 on a bad --policy like clap.
package simtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustack/routing-conformance/sim/engine"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// flagValue returns the value of --name in args, either spelling.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// listValues returns the values following a list flag up to the next flag.
func listValues(args []string, name string) []string {
	var out []string
	for i, a := range args {
		if a != name {
			continue
		}
		for _, v := range args[i+1:] {
			if strings.HasPrefix(v, "--") {
				break
			}
			out = append(out, v)
		}
	}
	return out
}

func serve(ctx context.Context, l net.Listener, h http.Handler) func() {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
}

// Engine is a fake OpenAI engine. Env SIM_ENGINE_STARTUP_DELAY delays
// /health answering 200.
func Engine(ctx context.Context, c *proc.Container) int {
	host, _ := flagValue(c.Args, "--host")
	port, ok := flagValue(c.Args, "--port")
	if !ok {
		port = "8000"
	}
	var delay time.Duration
	if v := c.Env[engine.EnvStartupDelay]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(c.Stderr, "bad SIM_ENGINE_STARTUP_DELAY %q: %v\n", v, err)
			return 1
		}
		delay = d
	}
	l, err := c.Listen(net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintf(c.Stderr, "ERROR: %v\n", err)
		return 1
	}
	readyAt := time.Now().Add(delay)
	var served atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		if time.Now().Before(readyAt) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	})
	info := func(w http.ResponseWriter, _ *http.Request) {
		// SGLang's server info, which sgl-model-gateway reads a worker's model from.
		_, _ = fmt.Fprintf(w, `{"model_path":%q,"served_model_name":%q}`, model(c.Args), model(c.Args))
	}
	mux.HandleFunc("/server_info", info)
	mux.HandleFunc("/get_server_info", info)
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model(c.Args))
	})
	gen := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Worker-Id", c.Pod.Name)
		_, _ = fmt.Fprintf(w, `{"id":"cmpl-%d","object":"chat.completion","model":%q,`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, n, model(c.Args))
	}
	mux.HandleFunc("/v1/chat/completions", gen)
	mux.HandleFunc("/v1/completions", gen)
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "# HELP fake_requests_total Requests served.\n# TYPE fake_requests_total counter\n"+
			"fake_requests_total %d\n", served.Load())
	})
	stop := serve(ctx, l, mux)
	fmt.Fprintf(c.Stdout, "INFO:     Uvicorn running on http://%s:%s\n", host, port)
	<-ctx.Done()
	stop()
	fmt.Fprintln(c.Stdout, "INFO:     Shutting down")
	return 0
}

func model(args []string) string {
	if v, ok := flagValue(args, "--model-path"); ok {
		return v
	}
	if len(args) > 1 && args[0] == "serve" {
		return args[1]
	}
	return "unknown"
}

// Policies the fake router accepts; anything else fails like clap.
var Policies = []string{"random", "round_robin", "cache_aware", "power_of_two"}

type worker struct {
	url, pod string
	served   atomic.Int64
}

// Router is a fake argv router.
func Router(ctx context.Context, c *proc.Container) int {
	policy, ok := flagValue(c.Args, "--policy")
	if !ok {
		policy = "cache_aware"
	}
	if !slices.Contains(Policies, policy) {
		fmt.Fprintf(c.Stderr, "error: invalid value '%s' for '--policy <POLICY>'\n  [possible values: %s]\n\n"+
			"For more information, try '--help'.\n", policy, strings.Join(Policies, ", "))
		return 2
	}
	host, _ := flagValue(c.Args, "--host")
	port, _ := flagValue(c.Args, "--port")
	mport, _ := flagValue(c.Args, "--prometheus-port")
	ns, _ := flagValue(c.Args, "--service-discovery-namespace")
	wport, _ := flagValue(c.Args, "--service-discovery-port")
	selector := map[string]string{}
	for _, kv := range append(listValues(c.Args, "--selector"),
		append(listValues(c.Args, "--prefill-selector"), listValues(c.Args, "--decode-selector")...)...) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			selector[k] = v
		}
	}

	fmt.Fprintf(c.Stdout, "Starting router on %s:%s | policy: %s\n", host, port, policy)
	l, err := c.Listen(net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintf(c.Stderr, "Error: %v\n", err)
		return 1
	}
	ml, err := c.Listen(net.JoinHostPort(host, mport))
	if err != nil {
		_ = l.Close()
		fmt.Fprintf(c.Stderr, "Error: %v\n", err)
		return 1
	}

	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	var mu sync.Mutex
	workers := map[string]*worker{}
	var order []*worker
	var rr atomic.Uint64
	var total atomic.Int64

	resync := func() {
		pods := c.Pods.List(ns, selector)
		mu.Lock()
		defer mu.Unlock()
		keep := map[string]bool{}
		for _, p := range pods {
			if p.Phase != "Running" || !p.Ready || p.Deleting {
				continue
			}
			url := "http://" + net.JoinHostPort(p.IP, wport)
			keep[url] = true
			if workers[url] == nil {
				w := &worker{url: url, pod: p.Name}
				workers[url] = w
				order = append(order, w)
				fmt.Fprintf(c.Stdout, "Adding pod: %s | url: %s\n", p.Name, url)
			}
		}
		order = slices.DeleteFunc(order, func(w *worker) bool {
			if !keep[w.url] {
				delete(workers, w.url)
				fmt.Fprintf(c.Stdout, "Removing pod: %s | url: %s\n", w.pod, w.url)
				return true
			}
			return false
		})
	}
	ticks, cancelWatch := c.Pods.Watch()
	defer cancelWatch()
	resync()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				resync()
			}
		}
	}()

	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc(operator.ObserverPath, func(w http.ResponseWriter, _ *http.Request) {
		doc := operator.ObserverDocument{Workers: []operator.ObserverWorker{}}
		mu.Lock()
		for _, x := range order {
			doc.Workers = append(doc.Workers, operator.ObserverWorker{URL: x.url, PodHint: x.pod,
				Selection: operator.ObserverSelection{Registered: true, Healthy: true, InSelection: true}})
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if len(order) == 0 {
			mu.Unlock()
			http.Error(w, "No available workers (all circuits open or unhealthy)", http.StatusServiceUnavailable)
			return
		}
		wk := order[rr.Add(1)%uint64(len(order))]
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		req, err := http.NewRequestWithContext(r.Context(), r.Method, wk.url+r.URL.Path, strings.NewReader(string(body)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		wk.served.Add(1)
		total.Add(1)
	})
	metrics := http.NewServeMux()
	metrics.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# HELP fake_router_requests_total Requests proxied.\n# TYPE fake_router_requests_total counter\n")
		mu.Lock()
		for _, x := range order {
			fmt.Fprintf(w, "fake_router_requests_total{worker=%q} %d\n", x.url, x.served.Load())
		}
		mu.Unlock()
		fmt.Fprintf(w, "# HELP fake_router_active_workers Workers.\n# TYPE fake_router_active_workers gauge\n"+
			"fake_router_active_workers %d\n", len(order))
	})
	stopAPI := serve(ctx, l, mux)
	stopMetrics := serve(ctx, ml, metrics)
	fmt.Fprintf(c.Stdout, "Starting server on %s:%s\n", host, port)
	<-ctx.Done()
	stopAPI()
	stopMetrics()
	<-watchDone
	return 0
}

// Crasher writes a line to each stream and exits with the code in
// FAKE_EXIT_CODE (default 2), optionally after FAKE_RUN_FOR.
func Crasher(ctx context.Context, c *proc.Container) int {
	fmt.Fprintf(c.Stdout, "starting %s\n", c.Pod.Name)
	fmt.Fprintf(c.Stderr, "error: crashing on purpose\n")
	if d, err := time.ParseDuration(c.Env["FAKE_RUN_FOR"]); err == nil {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0
		}
	}
	code := 2
	if v, err := strconv.Atoi(c.Env["FAKE_EXIT_CODE"]); err == nil {
		code = v
	}
	return code
}
