package vllmrouter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/cli"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/promexp"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/retry"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rustfmt"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/tracelog"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/upstream"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// Log call sites. The targets and files are vllm-router's modules; the line
// numbers were not established for v0.1.15 (routers.md §8) and are the
// nearest read: match messages, never lines.
var (
	siteBanner        = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 718}
	siteSingleRouter  = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 795}
	siteMultiRouter   = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 745}
	siteHealthChecker = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 807}
	siteSDStarted     = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 838}
	siteSDFailed      = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 848}
	siteRouterReady   = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 856}
	siteStartServer   = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 888}
	siteTerminate     = tracelog.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 921}
	siteSDStart       = tracelog.Site{Target: "vllm_router_rs::service_discovery", File: "src/service_discovery.rs", Line: 236}
	siteAddingPod     = tracelog.Site{Target: "vllm_router_rs::service_discovery", File: "src/service_discovery.rs", Line: 381}
	siteRemovingPod   = tracelog.Site{Target: "vllm_router_rs::service_discovery", File: "src/service_discovery.rs", Line: 470}
	siteAddedWorker   = tracelog.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1133}
	siteRemovedWorker = tracelog.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1228}
	siteRemovedTree   = tracelog.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1245}
	siteStartupWait   = tracelog.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1118}
)

// router is one vllm-router process.
type router struct {
	cfg    *config
	c      *proc.Container
	log    *tracelog.Logger
	m      *metrics
	reg    *workers.Registry
	rng    *rand.Rand
	client *http.Client
	// probe is add_worker's health client (timeout = startup timeout).
	probe *http.Client

	pol, prefillPol, decodePol policy.Policy

	retryCfg  retry.Config
	cbCfg     workers.CircuitConfig
	healthCfg workers.HealthConfig
	boot      time.Time

	mu      sync.Mutex
	pending map[string]discovery.Target
}

func seededRand(c *proc.Container) *rand.Rand {
	if s, ok := c.Env["SIM_ROUTER_SEED"]; ok {
		if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64); err == nil {
			return rand.New(rand.NewPCG(n, n^0x9e3779b97f4a7c15))
		}
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// lockedSource serialises a rand.Source shared by policies.
type lockedSource struct {
	mu  sync.Mutex
	src *rand.Rand
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src.Uint64()
}

func startup(ctx context.Context, c *proc.Container, cfg *config, out, errw io.Writer) int {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("DEBUG: Server startup function called")
	p("DEBUG: Initializing logging")
	level, _ := tracelog.ParseLevel(cfg.LogLevel)
	log := tracelog.New(out, level)
	p("DEBUG: Logging initialized")

	p("DEBUG: Initializing Prometheus metrics")
	m := newMetrics()
	promLn, err := c.Listen(cli.HostPort(cfg.PromHost, cfg.PromPort))
	if err != nil {
		fmt.Fprintf(errw, "\nthread 'main' panicked at src/metrics.rs:343:10:\nfailed to install Prometheus metrics exporter: FailedToCreateHTTPListener(%q)\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n", err.Error())
		return 101
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	wg.Add(1)
	go func() { defer wg.Done(); _ = promexp.Serve(runCtx, promLn, m.reg) }()
	p("DEBUG: Prometheus metrics initialized")

	log.Info(siteBanner, "Starting router on %s:%d | mode: %s | policy: %s | kv_connector: %s | max_payload: %dMB",
		cfg.Host, cfg.Port, cfg.modeDebug(), cfg.policyDebug(cfg.Policy), cfg.kvConnectorDebug(), cfg.MaxPayload/(1024*1024))

	p("DEBUG: Creating HTTP client")
	rt := &router{
		cfg: cfg, c: c, log: log, m: m,
		rng:       seededRand(c),
		client:    upstream.NewClient(cli.Secs(cfg.RequestTimeout)),
		probe:     upstream.NewClient(cli.Secs(cfg.StartupTimeout)),
		boot:      time.Now(),
		pending:   map[string]discovery.Target{},
		retryCfg:  cfg.Retry(),
		cbCfg:     cfg.Circuit(),
		healthCfg: cfg.Health(),
	}
	defer upstream.Close(rt.client)
	defer upstream.Close(rt.probe)
	rt.reg = workers.NewRegistry(workers.OrderRandom, rt.rng)
	p("DEBUG: HTTP client created")
	p("DEBUG: Creating AppContext")
	src := &lockedSource{src: rand.New(rand.NewPCG(rt.rng.Uint64(), rt.rng.Uint64()))}
	mk := func(name string) (policy.Policy, error) {
		return policy.New(policy.FlavorVR, name, cfg.policyCfg,
			policy.WithRandSource(src),
			policy.WithInfoLogger(func(r policy.LogRecord) {
				log.Print(tracelog.Info, tracelog.Site{Target: r.Target, File: r.File, Line: r.Line}, r.Message)
			}))
	}
	if rt.pol, err = mk(cfg.Policy); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	rt.prefillPol, rt.decodePol = rt.pol, rt.pol
	if cfg.PrefillPolicy != nil {
		if rt.prefillPol, err = mk(*cfg.PrefillPolicy); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
	}
	if cfg.DecodePolicy != nil {
		if rt.decodePol, err = mk(*cfg.DecodePolicy); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
	}
	p("DEBUG: AppContext created")
	for _, pol := range uniquePolicies(rt.pol, rt.prefillPol, rt.decodePol) {
		wg.Add(1)
		go func(pol policy.Policy) { defer wg.Done(); _ = pol.Run(runCtx) }(pol)
	}

	if cfg.EnableIGW {
		log.Info(siteMultiRouter, "Multi-router mode enabled (enable_igw=true)")
	} else {
		log.Info(siteSingleRouter, "Single router mode (enable_igw=false)")
	}
	// Router::new: the static workers must answer /health first.
	m.activeWorkers.Set(float64(len(cfg.WorkerURLs)))
	if len(cfg.WorkerURLs) > 0 && !cfg.PD {
		if err := rt.waitStatic(ctx); err != nil {
			fmt.Fprintf(errw, "Error: %s\n", rustfmt.Str(err.Error()))
			return 1
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		workers.RunHealthChecks(runCtx, rt.reg, rt.healthCfg, rt.client, func(w *workers.Worker, healthy bool) {
			m.workerHealth.WithLabelValues(w.URL()).Set(b2f(healthy))
		})
	}()
	log.Info(siteHealthChecker, "Started health checker for workers with %ds interval", cfg.Flags.Uint("health-check-interval-secs"))

	if cfg.ServiceDiscovery {
		if c.Pods == nil {
			log.Error(siteSDFailed, "Failed to start service discovery: no Kubernetes API available")
		} else {
			rt.logDiscoveryStart()
			wg.Add(1)
			go func() { defer wg.Done(); rt.runDiscovery(runCtx) }()
			log.Info(siteSDStarted, "Service discovery started")
		}
	}
	log.Info(siteRouterReady, "Router ready | workers: %s", rustfmt.StrVec(rt.reg.URLs()))

	addr := cli.HostPort(cfg.Host, cfg.Port)
	ln, err := c.Listen(addr)
	if err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	log.Info(siteStartServer, "Starting server on %s", addr)
	srv := &http.Server{Handler: rt.handler(), ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info(siteTerminate, "Received terminate signal, starting graceful shutdown")
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		<-errc
		return 0
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return 0
		}
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
}

func uniquePolicies(ps ...policy.Policy) []policy.Policy {
	var out []policy.Policy
	for _, p := range ps {
		dup := false
		for _, q := range out {
			if q == p {
				dup = true
			}
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// waitStatic is Router::new's wait_for_healthy_workers for --worker-urls:
// at least one must answer /health, then all are registered.
func (rt *router) waitStatic(ctx context.Context) error {
	deadline := time.Now().Add(cli.Secs(rt.cfg.StartupTimeout))
	for {
		for _, u := range rt.cfg.WorkerURLs {
			if workers.Probe(ctx, rt.probe, u+"/health", 2*time.Second) {
				for _, u := range rt.cfg.WorkerURLs {
					rt.admit(u, 0, workers.Regular, "", "", nil)
				}
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Timeout %ds waiting for hosts %s to become healthy. Please set --router-worker-startup-timeout-secs (vllm_router.launch_server) or --worker-startup-timeout-secs (vllm_worker.router) to a larger value",
				rt.cfg.StartupTimeout, rustfmt.StrVec(rt.cfg.WorkerURLs))
		}
		if !sleepCtx(ctx, cli.Secs(rt.cfg.StartupInterval)) {
			return ctx.Err()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (rt *router) logDiscoveryStart() {
	if rt.cfg.PD {
		rt.log.Info(siteSDStart, "Starting K8s service discovery | PD mode | prefill: '%s' | decode: '%s'",
			joinSelector(rt.cfg.PrefillSelector), joinSelector(rt.cfg.DecodeSelector))
		return
	}
	rt.log.Info(siteSDStart, "Starting K8s service discovery | selector: '%s'", joinSelector(rt.cfg.Selector))
}

// joinSelector renders a selector map as k=v joined by ",". The source
// iterates a HashMap (random order); this port sorts.
func joinSelector(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func (rt *router) runDiscovery(ctx context.Context) {
	discovery.Run(ctx, rt.c.Pods, rt.cfg.Discovery("vllm.ai/bootstrap-port"), discovery.Hooks{
		Adding: func(t discovery.Target) {
			rt.log.Info(siteAddingPod, "Adding pod: %s | type: %s | url: %s", t.Pod.Name, t.PodTypeDebug(), t.URL)
		},
		Register: rt.register,
		Removing: func(t discovery.Target) {
			rt.log.Info(siteRemovingPod, "Removing pod: %s | type: %s | url: %s", t.Pod.Name, t.PodTypeDebug(), t.URL)
			rt.remove(t.URL)
		},
	})
}

// register is Router::add_worker: poll /health every
// --worker-startup-check-interval until it answers 2xx (or the startup
// timeout passes), then admit the worker.
func (rt *router) register(ctx context.Context, t discovery.Target) {
	rt.mu.Lock()
	rt.pending[t.URL] = t
	rt.mu.Unlock()
	defer func() {
		rt.mu.Lock()
		delete(rt.pending, t.URL)
		rt.mu.Unlock()
	}()
	deadline := time.Now().Add(cli.Secs(rt.cfg.StartupTimeout))
	for {
		if workers.Probe(ctx, rt.probe, t.URL+"/health", cli.Secs(rt.cfg.StartupTimeout)) {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			rt.log.Error(siteStartupWait, "Timeout %ds waiting for worker %s to become healthy. Please set --router-worker-startup-timeout-secs (vllm_router.launch_server) or --worker-startup-timeout-secs (vllm_worker.router) to a larger value",
				rt.cfg.StartupTimeout, t.URL)
			return
		}
		if !sleepCtx(ctx, cli.Secs(rt.cfg.StartupInterval)) {
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	rt.admit(t.URL, t.Port, t.Role, t.Pod.Name, t.Pod.UID, t.BootstrapPort)
}

// admit registers a healthy worker and tells its policy.
func (rt *router) admit(url string, port int, role workers.Role, pod, uid string, bootstrap *int) {
	if port == 0 {
		port = portOf(url)
	}
	w := workers.New(url, port, role, rt.cbCfg)
	w.PodName, w.PodUID, w.BootstrapPort = pod, uid, bootstrap
	if !rt.reg.Add(w) {
		return
	}
	rt.log.Info(siteAddedWorker, "Added worker: %s", url)
	rt.m.cbState.WithLabelValues(url).Set(0)
	pol := rt.policyFor(role)
	if wi, ok := pol.(policy.WorkerIniter); ok && pol.Name() == policy.CacheAware {
		// init_workers with every worker of the model, after each add.
		wi.InitWorkers(rt.urlsOf(role), "")
	} else {
		pol.AddWorker(url, "")
	}
	rt.m.activeWorkers.Set(float64(len(rt.reg.All())))
}

func (rt *router) remove(url string) {
	w := rt.reg.Remove(url)
	if w == nil {
		return
	}
	rt.log.Info(siteRemovedWorker, "Removed worker: %s", url)
	rt.m.activeWorkers.Set(float64(len(rt.reg.All())))
	pol := rt.policyFor(w.Role())
	pol.RemoveWorker(url)
	if pol.Name() == policy.CacheAware {
		rt.log.Info(siteRemovedTree, "Removed worker from cache-aware tree: %s", url)
	}
}

func (rt *router) policyFor(role workers.Role) policy.Policy {
	switch role {
	case workers.Prefill:
		return rt.prefillPol
	case workers.Decode:
		return rt.decodePol
	}
	return rt.pol
}

func (rt *router) urlsOf(role workers.Role) []string {
	var out []string
	for _, w := range rt.reg.All() {
		if w.Role() == role {
			out = append(out, w.URL())
		}
	}
	return out
}

func portOf(url string) int {
	i := strings.LastIndex(url, ":")
	if i < 0 {
		return 80
	}
	n, err := strconv.Atoi(strings.TrimRight(url[i+1:], "/"))
	if err != nil {
		return 80
	}
	return n
}
