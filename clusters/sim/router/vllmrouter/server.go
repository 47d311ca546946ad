package vllmrouter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/cli"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/discovery"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/debug"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/tracing"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// Log call sites. The targets and files are vllm-router's modules; the line
// numbers were not established for v0.1.15 (docs/routers.md#not-established) and are the
// nearest read: match messages, never lines.
var (
	siteBanner        = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 718}
	siteSingleRouter  = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 795}
	siteMultiRouter   = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 745}
	siteHealthChecker = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 807}
	siteSDStarted     = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 838}
	siteSDFailed      = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 848}
	siteRouterReady   = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 856}
	siteStartServer   = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 888}
	siteTerminate     = tracing.Site{Target: "vllm_router_rs::server", File: "src/server.rs", Line: 921}
	siteSDStart       = tracing.Site{Target: "vllm_router_rs::service_discovery", File: "src/service_discovery.rs", Line: 236}
	siteAddingPod     = tracing.Site{Target: "vllm_router_rs::service_discovery", File: "src/service_discovery.rs", Line: 381}
	siteRemovingPod   = tracing.Site{Target: "vllm_router_rs::service_discovery", File: "src/service_discovery.rs", Line: 470}
	siteAddedWorker   = tracing.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1133}
	siteRemovedWorker = tracing.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1228}
	siteRemovedTree   = tracing.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1245}
	siteStartupWait   = tracing.Site{Target: "vllm_router_rs::routers::http::router", File: "src/routers/http/router.rs", Line: 1118}
)

// router is one vllm-router process.
type router struct {
	cfg    *config
	c      *proc.Container
	log    *tracing.Logger
	m      *metrics
	reg    *workers.Registry
	client *http.Client
	// probe is add_worker's health client (timeout = startup timeout).
	probe *http.Client
	// pols: in P/D mode each pool has an instance of its own.
	pols routerbase.Policies

	retryCfg  routerbase.RetryConfig
	cbCfg     workers.CircuitConfig
	healthCfg workers.HealthConfig
	boot      time.Time
	pending   routerbase.Pending
}

func startup(ctx context.Context, c *proc.Container, cfg *config, out, errw io.Writer) int {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("DEBUG: Server startup function called")
	p("DEBUG: Initializing logging")
	level, _ := tracing.ParseLevel(cfg.LogLevel)
	log := tracing.New(out, level)
	p("DEBUG: Logging initialized")

	p("DEBUG: Initializing Prometheus metrics")
	m := newMetrics()
	bg := routerbase.NewGroup()
	defer bg.Stop()
	if err := routerbase.ServeMetrics(bg, c, cli.HostPort(cfg.PromHost, cfg.PromPort), m.reg); err != nil {
		return routerbase.Panic(errw, "src/metrics.rs:343:10", err)
	}
	p("DEBUG: Prometheus metrics initialized")

	log.Info(siteBanner, "Starting router on %s:%d | mode: %s | policy: %s | kv_connector: %s | max_payload: %dMB",
		cfg.Host, cfg.Port, cfg.modeDebug(), cfg.policyDebug(cfg.Policy), cfg.kvConnectorDebug(), cfg.MaxPayload/(1024*1024))

	p("DEBUG: Creating HTTP client")
	rng := routerbase.Rand(c)
	rt := &router{
		cfg: cfg, c: c, log: log, m: m,
		// get_all() walks a DashMap keyed by random UUIDs: an order that
		// looks random per process (docs/routers.md#candidates-order-and-load).
		reg:       workers.NewRegistry(workers.OrderRandom, rng),
		client:    httpx.NewClient(cli.Secs(cfg.RequestTimeout)),
		probe:     httpx.NewClient(cli.Secs(cfg.StartupTimeout)),
		boot:      time.Now(),
		retryCfg:  cfg.Retry(),
		cbCfg:     cfg.Circuit(),
		healthCfg: cfg.Health(),
	}
	defer httpx.CloseIdle(rt.client)
	defer httpx.CloseIdle(rt.probe)
	p("DEBUG: HTTP client created")
	p("DEBUG: Creating AppContext")
	mk := routerbase.PolicyMaker(policy.FlavorVR, cfg.policyCfg, rng, log)
	var err error
	if rt.pols.Regular, err = mk(cfg.Policy); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	rt.pols.Prefill, rt.pols.Decode = rt.pols.Regular, rt.pols.Regular
	if cfg.PD {
		// create_vllm_pd_router: one instance per pool, each from its own
		// flag else --policy, never the regular one (docs/routers.md#corrections).
		if rt.pols.Prefill, rt.pols.Decode, err = routerbase.PoolPolicies(mk, cfg.Policy, cfg.PrefillPolicy, cfg.DecodePolicy); err != nil {
			fmt.Fprintf(errw, "Error: %v\n", err)
			return 1
		}
	}
	p("DEBUG: AppContext created")
	rt.pols.Run(bg)

	if cfg.EnableIGW {
		log.Info(siteMultiRouter, "Multi-router mode enabled (enable_igw=true)")
	} else {
		log.Info(siteSingleRouter, "Single router mode (enable_igw=false)")
	}
	// Router::new: the static workers must answer /health first.
	if !cfg.PD {
		m.activeWorkers.Set(float64(len(cfg.WorkerURLs)))
	}
	if len(cfg.WorkerURLs) > 0 && !cfg.PD {
		if err := rt.waitStatic(ctx); err != nil {
			fmt.Fprintf(errw, "Error: %s\n", debug.Str(err.Error()))
			return 1
		}
	}
	routerbase.RunHealthChecks(bg, rt.reg, rt.healthCfg, rt.client, m.workerHealth)
	log.Info(siteHealthChecker, "Started health checker for workers with %ds interval", cfg.Flags.Uint("health-check-interval-secs"))

	if cfg.ServiceDiscovery {
		routerbase.StartDiscovery(bg, c.Pods, cfg.Discovery("vllm.ai/bootstrap-port"), routerbase.Discovery{
			Log: log, Failed: siteSDFailed, Started: siteSDStarted,
			Start: siteSDStart, StartPD: siteSDStart, Adding: siteAddingPod, Removing: siteRemovingPod,
			Hooks: discovery.Hooks{
				Register: rt.register,
				Removing: func(t discovery.Target) { rt.remove(t.URL) },
			},
		})
	}
	log.Info(siteRouterReady, "Router ready | workers: %s", debug.StrVec(rt.reg.URLs()))

	addr := cli.HostPort(cfg.Host, cfg.Port)
	ln, err := c.Listen(addr)
	if err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	log.Info(siteStartServer, "Starting server on %s", addr)
	return routerbase.Serve(ctx, ln, c.Faults.Handler(int(cfg.Port), rt.handler()), 30*time.Second, log, siteTerminate, errw)
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
				rt.cfg.StartupTimeout, debug.StrVec(rt.cfg.WorkerURLs))
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

// register is Router::add_worker: poll /health every
// --worker-startup-check-interval until it answers 2xx (or the startup
// timeout passes), then admit the worker.
func (rt *router) register(ctx context.Context, t discovery.Target) {
	defer rt.pending.Track(t)()
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

// pool is role's workers in the order its policy sees them: the prefill
// and regular pools walk the registry's DashMap (get_all,
// get_prefill_workers), the decode pool its type index, in registration
// order (get_decode_workers = get_by_type;
// vllm-project/router@v0.1.15:src/core/worker_registry.rs).
func (rt *router) pool(role workers.Role) []*workers.Worker {
	all := rt.reg.All()
	if role == workers.Decode {
		all = rt.reg.Registered()
	}
	var out []*workers.Worker
	for _, w := range all {
		if w.Role() == role {
			out = append(out, w)
		}
	}
	return out
}

// admit registers a healthy worker and tells its policy.
func (rt *router) admit(url string, port int, role workers.Role, pod, uid string, bootstrap *int) {
	if port == 0 {
		port = workers.PortOf(url)
	}
	w := workers.New(url, port, role, rt.cbCfg)
	w.PodName, w.PodUID, w.BootstrapPort = pod, uid, bootstrap
	if !rt.reg.Add(w) {
		return
	}
	rt.log.Info(siteAddedWorker, "Added worker: %s", url)
	pol := rt.pols.For(role)
	if wi, ok := pol.(policy.WorkerIniter); ok && pol.Name() == policy.CacheAware {
		// init_workers with every worker of the model, after each add.
		wi.InitWorkers(rt.urlsOf(role), "")
	} else {
		pol.AddWorker(url, "")
	}
	rt.setActiveWorkers()
}

// setActiveWorkers is the regular router's set_active_workers on every add
// and removal; the vLLM P/D router never sets the gauge
// (vllm-project/router@v0.1.15:src/routers/http/router.rs is its only caller).
func (rt *router) setActiveWorkers() {
	if !rt.cfg.PD {
		rt.m.activeWorkers.Set(float64(len(rt.reg.All())))
	}
}

func (rt *router) remove(url string) {
	w := rt.reg.Remove(url)
	if w == nil {
		return
	}
	rt.log.Info(siteRemovedWorker, "Removed worker: %s", url)
	rt.setActiveWorkers()
	pol := rt.pols.For(w.Role())
	pol.RemoveWorker(url)
	if pol.Name() == policy.CacheAware {
		rt.log.Info(siteRemovedTree, "Removed worker from cache-aware tree: %s", url)
	}
}

func (rt *router) urlsOf(role workers.Role) []string {
	var out []string
	for _, w := range rt.pool(role) {
		if w.Role() == role {
			out = append(out, w.URL())
		}
	}
	return out
}
