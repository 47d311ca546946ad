package sglanggateway

import (
	"context"
	"encoding/json"
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

// Log call sites: targets, files and lines as read at smg 7c3502c6 (the
// gateway-v0.3.1 release commit).
var (
	siteBanner         = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 709}
	siteInitWorkers    = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 774}
	siteJobSubmitted   = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 792}
	siteNoMCP          = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 804}
	siteWorkersInit    = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 816}
	siteRateLimitOff   = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 844}
	siteSDStarted      = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 874}
	siteSDFailed       = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 882}
	siteRouterReady    = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 889}
	siteStartServer    = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 922}
	siteTerminate      = tracing.Site{Target: "smg::server", File: "src/server.rs", Line: 989}
	siteRMMulti        = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 92}
	siteRMHTTPRegular  = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 96}
	siteRMGRPCRegular  = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 107}
	siteRMPDAuto       = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 115}
	siteRMHTTPPD       = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 127}
	siteRMGRPCPD       = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 145}
	siteRMOpenAI       = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 156}
	siteRMInitialized  = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 164}
	siteRMSingle       = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 169}
	siteRMSingleID     = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 177}
	siteRMDefault      = tracing.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 216}
	siteSDStartPD      = tracing.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 203}
	siteSDStart        = tracing.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 215}
	siteAddingPod      = tracing.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 355}
	siteRemovingPod    = tracing.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 481}
	siteActivated      = tracing.Site{Target: "smg::core::steps::worker::shared::activate", File: "src/core/steps/worker/shared/activate.rs", Line: 27}
	siteMetadataFallbk = tracing.Site{Target: "smg::core::steps::worker::local::discover_metadata", File: "src/core/steps/worker/local/discover_metadata.rs", Line: 65}
)

// unknownModel is SG's UNKNOWN_MODEL_ID.
const unknownModel = "unknown"

// router is one sgl-model-gateway process.
type router struct {
	cfg    *config
	c      *proc.Container
	log    *tracing.Logger
	m      *metrics
	reg    *workers.Registry
	client *http.Client
	probe  *http.Client

	// pols: the default (regular) router's policy and the PD router's own
	// instances.
	pols routerbase.Policies

	retryCfg  routerbase.RetryConfig
	cbCfg     workers.CircuitConfig
	healthCfg workers.HealthConfig
	boot      time.Time
	pending   routerbase.Pending
	inflight  inflight
}

func startup(ctx context.Context, c *proc.Container, cfg *config, out, errw io.Writer) int {
	level, _ := tracing.ParseLevel(cfg.LogLevel)
	log := tracing.New(out, level)
	m := newMetrics()
	bg := routerbase.NewGroup()
	defer bg.Stop()
	if err := routerbase.ServeMetrics(bg, c, cli.HostPort(cfg.PromHost, cfg.PromPort), m.reg); err != nil {
		return routerbase.Panic(errw, "src/observability/metrics.rs:362:10", err)
	}

	log.Info(siteBanner, "Starting router on %s:%d | mode: %s | policy: %s | max_payload: %dMB",
		cfg.Host, cfg.Port, cfg.modeDebug(), cfg.policyDebug(cfg.Policy), cfg.MaxPayload/(1024*1024))

	rng := routerbase.Rand(c)
	rt := &router{
		cfg: cfg, c: c, log: log, m: m,
		// get_by_model: candidates in registration (discovery) order.
		reg:       workers.NewRegistry(workers.OrderRegistration, rng),
		client:    httpx.NewClient(cli.Secs(cfg.RequestTimeout)),
		probe:     httpx.NewClient(cli.Secs(cfg.Flags.Uint("health-check-timeout-secs"))),
		boot:      time.Now(),
		retryCfg:  cfg.Retry(),
		cbCfg:     cfg.Circuit(),
		healthCfg: cfg.Health(),
	}
	defer httpx.CloseIdle(rt.client)
	defer httpx.CloseIdle(rt.probe)
	mk := routerbase.PolicyMaker(policy.FlavorSG, cfg.policyCfg, rng, log)
	var err error
	if rt.pols.Regular, err = mk(cfg.Policy); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	// The PD router's pools: in IGW mode the router manager builds them
	// from the main --policy (create_pd_router(None, None, &policy),
	// lightseekorg/smg@7c3502c6:src/routers/router_manager.rs); only a
	// non-IGW PD router honours --prefill-policy/--decode-policy.
	prefill, decode := cfg.PrefillPolicy, cfg.DecodePolicy
	if cfg.EnableIGW {
		prefill, decode = nil, nil
	}
	if rt.pols.Prefill, rt.pols.Decode, err = routerbase.PoolPolicies(mk, cfg.Policy, prefill, decode); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	rt.pols.Run(bg)

	log.Info(siteInitWorkers, "Initializing workers for routing mode: %s", cfg.modeDebug())
	log.Info(siteJobSubmitted, "Worker initialization job submitted (will complete in background)")
	log.Info(siteNoMCP, "No MCP config provided, skipping MCP server initialization")
	log.Info(siteWorkersInit, "Workers initialized: 0 total, 0 healthy")
	if cfg.EnableIGW {
		log.Info(siteRMMulti, "Initializing RouterManager in multi-router mode (IGW)")
		log.Info(siteRMHTTPRegular, "Created HTTP Regular router")
		log.Info(siteRMDefault, "Set default router to http-regular")
		log.Info(siteRMGRPCRegular, "Created gRPC Regular router")
		log.Info(siteRMPDAuto, "PD disaggregation auto-enabled for IGW mode, creating PD routers")
		log.Info(siteRMHTTPPD, "Created HTTP PD router")
		log.Info(siteRMGRPCPD, "Created gRPC PD router")
		log.Info(siteRMOpenAI, "Created OpenAI router")
		log.Info(siteRMInitialized, "RouterManager initialized with 5 routers for multi-router mode")
	} else {
		id := "http-regular"
		if cfg.PD {
			id = "http-pd"
		} else if cfg.Backend == "openai" {
			id = "http-openai"
		}
		log.Info(siteRMSingle, "Initializing RouterManager in single-router mode")
		log.Info(siteRMSingleID, "Created single router with ID: %s", id)
		log.Info(siteRMDefault, "Set default router to %s", id)
	}
	routerbase.RunHealthChecks(bg, rt.reg, rt.healthCfg, rt.client, m.workerHealth)
	bg.Go(rt.runLoadMonitor)
	bg.Go(rt.runInflightSampler)
	if cfg.Flags.Int("max-concurrent-requests") <= 0 {
		log.Info(siteRateLimitOff, "Rate limiting is disabled (max_concurrent_requests = -1)")
	}
	// Static --worker-urls / --prefill / --decode go through the same
	// registration workflow as discovered Pods.
	for _, u := range cfg.WorkerURLs {
		t := discovery.Target{URL: u, Port: workers.PortOf(u), Role: workers.Regular}
		bg.Go(func(ctx context.Context) { rt.register(ctx, t) })
	}
	if cfg.PD {
		for _, p := range cfg.Prefill {
			t := discovery.Target{URL: p.URL, Port: workers.PortOf(p.URL), Role: workers.Prefill, BootstrapPort: p.Port}
			bg.Go(func(ctx context.Context) { rt.register(ctx, t) })
		}
		for _, u := range cfg.Decode {
			t := discovery.Target{URL: u, Port: workers.PortOf(u), Role: workers.Decode}
			bg.Go(func(ctx context.Context) { rt.register(ctx, t) })
		}
	}
	if cfg.ServiceDiscovery {
		routerbase.StartDiscovery(bg, c.Pods, cfg.Discovery("sglang.ai/bootstrap-port"), routerbase.Discovery{
			Log: log, Failed: siteSDFailed, Started: siteSDStarted,
			Start: siteSDStart, StartPD: siteSDStartPD, Adding: siteAddingPod, Removing: siteRemovingPod,
			Hooks: discovery.Hooks{
				Adding:   func(discovery.Target) { rt.m.discRegs.WithLabelValues("kubernetes", "success").Inc() },
				Register: rt.register,
				Removing: func(t discovery.Target) {
					rt.m.discDeregs.WithLabelValues("kubernetes", "pod_deleted").Inc()
					rt.remove(t.URL)
				},
			},
		})
	}
	log.Info(siteRouterReady, "Router ready | workers: %s", debug.StrVec(rt.reg.URLs()))

	addr := cli.HostPort(cfg.Host, cfg.Port)
	log.Info(siteStartServer, "Starting server on %s", addr)
	ln, err := c.Listen(addr)
	if err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	// --shutdown-grace-period-secs bounds the drain; the kubelet's 30 s
	// grace period bounds it too.
	grace := min(cli.Secs(cfg.Flags.Uint("shutdown-grace-period-secs")), 30*time.Second)
	return routerbase.Serve(ctx, ln, c.Faults.Handler(int(cfg.Port), rt.handler()), grace, log, siteTerminate, errw)
}

// register is the local worker registration workflow: detect the connection
// (GET /health, retried with linear backoff 1 s … 5 s within the startup
// timeout), discover metadata (/server_info, falling back to
// /get_server_info; model = served_model_name, else model_path, else
// "unknown"), create and register the worker, update policies, activate.
func (rt *router) register(ctx context.Context, t discovery.Target) {
	defer rt.pending.Track(t)()
	timeout := cli.Secs(rt.cfg.Flags.Uint("health-check-timeout-secs"))
	deadline := time.Now().Add(cli.Secs(rt.cfg.StartupTimeout))
	for attempt := 1; ; attempt++ {
		if workers.Probe(ctx, rt.probe, t.URL+"/health", timeout) {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		wait := min(time.Duration(attempt)*time.Second, 5*time.Second)
		tm := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
	}
	model := rt.discoverModel(ctx, t.URL)
	if ctx.Err() != nil {
		return
	}
	w := workers.New(t.URL, t.Port, t.Role, rt.cbCfg)
	w.PodName, w.PodUID, w.BootstrapPort, w.ModelID = t.Pod.Name, t.Pod.UID, t.BootstrapPort, model
	if !rt.reg.Add(w) {
		return
	}
	rt.m.cb.State.WithLabelValues(t.URL).Set(0)
	// UpdatePoliciesStep seeds only the model's regular policy
	// (init_cache_aware_policy); nothing in gateway-v0.3.1 calls
	// init_pd_cache_aware_policies, so a cache_aware P/D pool has no tree
	// for the model and picks a random healthy worker every time
	// (sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/core/steps/worker/shared/update_policies.rs,
	// src/policies/registry.rs, src/policies/cache_aware.rs select_worker).
	if t.Role == workers.Regular {
		rt.pols.Regular.AddWorker(t.URL, model)
	}
	rt.log.Info(siteActivated, "Activated 1 worker(s) (marked as healthy)")
	rt.m.workerHealth.WithLabelValues(t.URL).Set(1)
	rt.setPoolSize(t.Role, model)
	rt.m.discWorkers.WithLabelValues("kubernetes").Set(float64(len(rt.reg.All())))
}

func (rt *router) discoverModel(ctx context.Context, url string) string {
	res := httpx.Send(ctx, rt.client, http.MethodGet, url+"/server_info", nil, nil, false, nil)
	if res.Err == nil && res.Status == http.StatusNotFound {
		rt.log.Warn(siteMetadataFallbk, "Endpoint '/server_info' returned 404, falling back to '/get_server_info' for backward compatibility. The '/get_server_info' endpoint is deprecated and will be removed in a future version. Please use '/server_info' instead.")
		res = httpx.Send(ctx, rt.client, http.MethodGet, url+"/get_server_info", nil, nil, false, nil)
	}
	if res.Err != nil || res.Status/100 != 2 {
		return unknownModel
	}
	var info struct {
		ModelPath       *string `json:"model_path"`
		ServedModelName *string `json:"served_model_name"`
	}
	if json.Unmarshal(res.Body, &info) != nil {
		return unknownModel
	}
	if info.ServedModelName != nil && *info.ServedModelName != "" {
		return *info.ServedModelName
	}
	if info.ModelPath != nil && *info.ModelPath != "" {
		return *info.ModelPath
	}
	return unknownModel
}

func (rt *router) remove(url string) {
	w := rt.reg.Remove(url)
	if w == nil {
		return
	}
	rt.pols.For(w.Role()).RemoveWorker(url)
	rt.setPoolSize(w.Role(), w.ModelID)
	rt.m.discWorkers.WithLabelValues("kubernetes").Set(float64(len(rt.reg.All())))
	// remove_worker_metrics: the per-worker gauges are reset, not deleted.
	rt.m.cbFailures.WithLabelValues(url).Set(0)
	rt.m.cbSuccesses.WithLabelValues(url).Set(0)
	rt.m.requestsActive.WithLabelValues(url).Set(0)
	rt.m.cb.State.WithLabelValues(url).Set(-1)
	rt.m.workerHealth.WithLabelValues(url).Set(-1)
}

func (rt *router) setPoolSize(role workers.Role, model string) {
	n := 0
	for _, w := range rt.reg.All() {
		if w.Role() == role && w.ModelID == model {
			n++
		}
	}
	rt.m.poolSize.WithLabelValues(string(role), "http", model).Set(float64(n))
}
