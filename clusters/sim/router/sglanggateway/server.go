package sglanggateway

import (
	"context"
	"encoding/json"
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

// Log call sites: targets, files and lines as read at smg 7c3502c6 (the
// gateway-v0.3.1 release commit).
var (
	siteBanner         = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 709}
	siteInitWorkers    = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 774}
	siteJobSubmitted   = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 792}
	siteNoMCP          = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 804}
	siteWorkersInit    = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 816}
	siteRateLimitOff   = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 844}
	siteSDStarted      = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 874}
	siteSDFailed       = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 882}
	siteRouterReady    = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 889}
	siteStartServer    = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 922}
	siteTerminate      = tracelog.Site{Target: "smg::server", File: "src/server.rs", Line: 989}
	siteRMMulti        = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 92}
	siteRMHTTPRegular  = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 96}
	siteRMGRPCRegular  = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 107}
	siteRMPDAuto       = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 115}
	siteRMHTTPPD       = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 127}
	siteRMGRPCPD       = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 145}
	siteRMOpenAI       = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 156}
	siteRMInitialized  = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 164}
	siteRMSingle       = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 169}
	siteRMSingleID     = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 177}
	siteRMDefault      = tracelog.Site{Target: "smg::routers::router_manager", File: "src/routers/router_manager.rs", Line: 216}
	siteSDStartPD      = tracelog.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 203}
	siteSDStart        = tracelog.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 215}
	siteAddingPod      = tracelog.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 355}
	siteRemovingPod    = tracelog.Site{Target: "smg::service_discovery", File: "src/service_discovery.rs", Line: 481}
	siteActivated      = tracelog.Site{Target: "smg::core::steps::worker::shared::activate", File: "src/core/steps/worker/shared/activate.rs", Line: 27}
	siteMetadataFallbk = tracelog.Site{Target: "smg::core::steps::worker::local::discover_metadata", File: "src/core/steps/worker/local/discover_metadata.rs", Line: 65}
)

// unknownModel is SG's UNKNOWN_MODEL_ID.
const unknownModel = "unknown"

// router is one sgl-model-gateway process.
type router struct {
	cfg    *config
	c      *proc.Container
	log    *tracelog.Logger
	m      *metrics
	reg    *workers.Registry
	client *http.Client
	probe  *http.Client

	// pol is the default (regular) policy; prefillPol and decodePol the PD
	// router's own instances.
	pol, prefillPol, decodePol policy.Policy

	retryCfg  retry.Config
	cbCfg     workers.CircuitConfig
	healthCfg workers.HealthConfig
	boot      time.Time

	mu      sync.Mutex
	pending map[string]discovery.Target
}

type lockedSource struct {
	mu  sync.Mutex
	src *rand.Rand
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src.Uint64()
}

func seededRand(c *proc.Container) *rand.Rand {
	if s, ok := c.Env["SIM_ROUTER_SEED"]; ok {
		if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64); err == nil {
			return rand.New(rand.NewPCG(n, n^0x9e3779b97f4a7c15))
		}
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

func startup(ctx context.Context, c *proc.Container, cfg *config, out, errw io.Writer) int {
	level, _ := tracelog.ParseLevel(cfg.LogLevel)
	log := tracelog.New(out, level)
	m := newMetrics()
	promLn, err := c.Listen(cli.HostPort(cfg.PromHost, cfg.PromPort))
	if err != nil {
		fmt.Fprintf(errw, "\nthread 'main' panicked at src/observability/metrics.rs:362:10:\nfailed to install Prometheus metrics exporter: FailedToCreateHTTPListener(%q)\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n", err.Error())
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

	log.Info(siteBanner, "Starting router on %s:%d | mode: %s | policy: %s | max_payload: %dMB",
		cfg.Host, cfg.Port, cfg.modeDebug(), cfg.policyDebug(cfg.Policy), cfg.MaxPayload/(1024*1024))

	rng := seededRand(c)
	rt := &router{
		cfg: cfg, c: c, log: log, m: m,
		reg:       workers.NewRegistry(workers.OrderRegistration, rng),
		client:    upstream.NewClient(cli.Secs(cfg.RequestTimeout)),
		probe:     upstream.NewClient(cli.Secs(cfg.Flags.Uint("health-check-timeout-secs"))),
		boot:      time.Now(),
		pending:   map[string]discovery.Target{},
		retryCfg:  cfg.Retry(),
		cbCfg:     cfg.Circuit(),
		healthCfg: cfg.Health(),
	}
	defer upstream.Close(rt.client)
	defer upstream.Close(rt.probe)
	src := &lockedSource{src: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))}
	mk := func(name string) (policy.Policy, error) {
		return policy.New(policy.FlavorSG, name, cfg.policyCfg,
			policy.WithRandSource(src),
			policy.WithInfoLogger(func(r policy.LogRecord) {
				log.Print(tracelog.Info, tracelog.Site{Target: r.Target, File: r.File, Line: r.Line}, r.Message)
			}))
	}
	if rt.pol, err = mk(cfg.Policy); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	// The PD router's pools: in IGW mode the router manager builds them
	// from the main --policy (create_pd_router(None, None, &policy)); only
	// a non-IGW PD router honours --prefill-policy/--decode-policy.
	pre, dec := cfg.Policy, cfg.Policy
	if !cfg.EnableIGW {
		if cfg.PrefillPolicy != nil {
			pre = *cfg.PrefillPolicy
		}
		if cfg.DecodePolicy != nil {
			dec = *cfg.DecodePolicy
		}
	}
	if rt.prefillPol, err = mk(pre); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	if rt.decodePol, err = mk(dec); err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	for _, pol := range []policy.Policy{rt.pol, rt.prefillPol, rt.decodePol} {
		wg.Add(1)
		go func(pol policy.Policy) { defer wg.Done(); _ = pol.Run(runCtx) }(pol)
	}

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
	wg.Add(1)
	go func() {
		defer wg.Done()
		workers.RunHealthChecks(runCtx, rt.reg, rt.healthCfg, rt.client, func(w *workers.Worker, healthy bool) {
			m.workerHealth.WithLabelValues(w.URL()).Set(b2f(healthy))
		})
	}()
	wg.Add(1)
	go func() { defer wg.Done(); rt.runLoadMonitor(runCtx) }()
	if cfg.Flags.Int("max-concurrent-requests") <= 0 {
		log.Info(siteRateLimitOff, "Rate limiting is disabled (max_concurrent_requests = -1)")
	}
	// Static --worker-urls / --prefill / --decode go through the same
	// registration workflow as discovered Pods.
	for _, u := range cfg.WorkerURLs {
		t := discovery.Target{URL: u, Port: portOf(u), Role: workers.Regular}
		wg.Add(1)
		go func() { defer wg.Done(); rt.register(runCtx, t) }()
	}
	if cfg.PD {
		for _, p := range cfg.Prefill {
			t := discovery.Target{URL: p.URL, Port: portOf(p.URL), Role: workers.Prefill, BootstrapPort: p.Port}
			wg.Add(1)
			go func() { defer wg.Done(); rt.register(runCtx, t) }()
		}
		for _, u := range cfg.Decode {
			t := discovery.Target{URL: u, Port: portOf(u), Role: workers.Decode}
			wg.Add(1)
			go func() { defer wg.Done(); rt.register(runCtx, t) }()
		}
	}
	if cfg.ServiceDiscovery {
		if c.Pods == nil {
			log.Error(siteSDFailed, "Failed to start service discovery: no Kubernetes API available")
		} else {
			if cfg.PD {
				log.Info(siteSDStartPD, "Starting K8s service discovery | PD mode | prefill: '%s' | decode: '%s'", joinSelector(cfg.PrefillSelector), joinSelector(cfg.DecodeSelector))
			} else {
				log.Info(siteSDStart, "Starting K8s service discovery | selector: '%s'", joinSelector(cfg.Selector))
			}
			wg.Add(1)
			go func() { defer wg.Done(); rt.runDiscovery(runCtx) }()
			log.Info(siteSDStarted, "Service discovery started")
		}
	}
	log.Info(siteRouterReady, "Router ready | workers: %s", rustfmt.StrVec(rt.reg.URLs()))

	addr := cli.HostPort(cfg.Host, cfg.Port)
	log.Info(siteStartServer, "Starting server on %s", addr)
	ln, err := c.Listen(addr)
	if err != nil {
		fmt.Fprintf(errw, "Error: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: rt.handler(), ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info(siteTerminate, "Received terminate signal, starting graceful shutdown")
		// --shutdown-grace-period-secs bounds the drain; the kubelet's
		// 30 s grace period bounds it too.
		grace := min(cli.Secs(cfg.Flags.Uint("shutdown-grace-period-secs")), 30*time.Second)
		sctx, cancel := context.WithTimeout(context.Background(), grace)
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

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

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

func (rt *router) runDiscovery(ctx context.Context) {
	discovery.Run(ctx, rt.c.Pods, rt.cfg.Discovery("sglang.ai/bootstrap-port"), discovery.Hooks{
		Adding: func(t discovery.Target) {
			rt.log.Info(siteAddingPod, "Adding pod: %s | type: %s | url: %s", t.Pod.Name, t.PodTypeDebug(), t.URL)
			rt.m.discRegs.WithLabelValues("kubernetes", "success").Inc()
		},
		Register: rt.register,
		Removing: func(t discovery.Target) {
			rt.log.Info(siteRemovingPod, "Removing pod: %s | type: %s | url: %s", t.Pod.Name, t.PodTypeDebug(), t.URL)
			rt.m.discDeregs.WithLabelValues("kubernetes", "pod_deleted").Inc()
			rt.remove(t.URL)
		},
	})
}

// register is the local worker registration workflow: detect the connection
// (GET /health, retried with linear backoff 1 s … 5 s within the startup
// timeout), discover metadata (/server_info, falling back to
// /get_server_info; model = served_model_name, else model_path, else
// "unknown"), create and register the worker, update policies, activate.
func (rt *router) register(ctx context.Context, t discovery.Target) {
	rt.mu.Lock()
	rt.pending[t.URL] = t
	rt.mu.Unlock()
	defer func() {
		rt.mu.Lock()
		delete(rt.pending, t.URL)
		rt.mu.Unlock()
	}()
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
	rt.m.cbState.WithLabelValues(t.URL).Set(0)
	rt.policyFor(t.Role).AddWorker(t.URL, model)
	rt.log.Info(siteActivated, "Activated 1 worker(s) (marked as healthy)")
	rt.m.workerHealth.WithLabelValues(t.URL).Set(1)
	rt.setPoolSize(t.Role, model)
	rt.m.discWorkers.WithLabelValues("kubernetes").Set(float64(len(rt.reg.All())))
}

func (rt *router) discoverModel(ctx context.Context, url string) string {
	res := upstream.Send(ctx, rt.client, http.MethodGet, url+"/server_info", nil, nil, false, nil)
	if res.Err == nil && res.Status == http.StatusNotFound {
		rt.log.Warn(siteMetadataFallbk, "Endpoint '/server_info' returned 404, falling back to '/get_server_info' for backward compatibility. The '/get_server_info' endpoint is deprecated and will be removed in a future version. Please use '/server_info' instead.")
		res = upstream.Send(ctx, rt.client, http.MethodGet, url+"/get_server_info", nil, nil, false, nil)
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
	rt.policyFor(w.Role()).RemoveWorker(url)
	rt.setPoolSize(w.Role(), w.ModelID)
	rt.m.discWorkers.WithLabelValues("kubernetes").Set(float64(len(rt.reg.All())))
	// remove_worker_metrics: the per-worker gauges are reset, not deleted.
	rt.m.cbFailures.WithLabelValues(url).Set(0)
	rt.m.cbSuccesses.WithLabelValues(url).Set(0)
	rt.m.requestsActive.WithLabelValues(url).Set(0)
	rt.m.cbState.WithLabelValues(url).Set(-1)
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

func (rt *router) policyFor(role workers.Role) policy.Policy {
	switch role {
	case workers.Prefill:
		return rt.prefillPol
	case workers.Decode:
		return rt.decodePol
	}
	return rt.pol
}
