// Package epp is the llm-d-router endpoint picker (EPP) as a sim program:
// the `epp` container of the router Pod gpustack-operator renders for
// llm-d-router. It parses the EPP's flags, loads the EndpointPickerConfig
// from the mounted ConfigMap with the loader's defaults and error texts,
// logs the startup lines as zap JSON on stderr, discovers endpoints by the
// --endpoint-selector, scrapes engine metrics, schedules each request
// through the configured profiles, serves metrics and the operator's
// observer view on --metrics-port, and answers the envoy container over
// Envoy's ext_proc gRPC on --grpc-port (package extproc).
//
// The run follows llm-d/llm-d-router@71f4f0999f95b96c49a9d0c4afbd18dfdb943c26
// (v0.10.0) cmd/epp/main.go and cmd/epp/runner/runner.go (Run, setup,
// parseConfigurationPhaseOne/Two) in the endpoint-selector (Kubernetes,
// pool-less) mode the operator uses. Exit codes: 2 for a flag pflag
// rejects (ExitOnError), 1 for any error Run returns, 0 after shutdown.
package epp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/pprof"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	"github.com/gpustack/routing-conformance/sim/llmd/eppconfig"
	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/options"
	"github.com/gpustack/routing-conformance/sim/llmd/prefixcache"
	"github.com/gpustack/routing-conformance/sim/llmd/scheduling"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// Build identity (version.CommitSHA, version.BuildRef as a v0.10.0 release
// image carries them).
const (
	CommitSHA = "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26"
	BuildRef  = "v0.10.0"
)

// Deps is what the program needs from the sim around it.
type Deps struct {
	// Files is the container's file system (mounted volumes): the EPP reads
	// --config-file through it. Paths are looked up without the leading "/".
	Files func(c *proc.Container) fs.FS
	// Pods is the Pod API for discovery; nil uses c.Pods.
	Pods func(c *proc.Container) datalayer.PodSource
	// KVEvents carries engine KV events to the precise producer (nil: none).
	KVEvents prefixcache.KVEventSource
	// HTTPClient scrapes engine metrics and calls the tokenizer's /render;
	// nil uses a client with the data source's 10 s timeout.
	HTTPClient *http.Client
	// Seed seeds the pickers' random tie-break; 0 seeds from the clock as
	// the EPP does. The seed used is reported in StartInfo.
	Seed uint64
	// Started is called once the EPP serves.
	Started func(StartInfo)
}

// StartInfo describes a started EPP.
type StartInfo struct {
	Pod, Namespace, Pool string
	// Seed is the pickers' seed.
	Seed uint64
	// ExtProc is the address the ext_proc gRPC server listens on.
	ExtProc string
}

// Call sites of the runner's log lines (cmd/epp/runner/runner.go).
const (
	siteBuild         zaplog.Site = "runner/runner.go:214"
	siteValidate      zaplog.Site = "runner/runner.go:224"
	siteFlags         zaplog.Site = "runner/runner.go:235"
	siteParseOne      zaplog.Site = "runner/runner.go:257"
	siteDrain         zaplog.Site = "runner/runner.go:310"
	siteMgrStart      zaplog.Site = "runner/runner.go:315"
	siteMgrError      zaplog.Site = "runner/runner.go:318"
	siteMgrDone       zaplog.Site = "runner/runner.go:323"
	siteDrainElapsed  zaplog.Site = "runner/runner.go:329"
	siteRawPhaseOne   zaplog.Site = "runner/runner.go:351"
	siteGKNN          zaplog.Site = "runner/runner.go:356"
	siteParseTwo      zaplog.Site = "runner/runner.go:376"
	sitePhaseTwo      zaplog.Site = "runner/runner.go:379"
	sitePprof         zaplog.Site = "runner/runner.go:427"
	siteParsed        zaplog.Site = "runner/runner.go:448"
	siteStability     zaplog.Site = "runner/runner.go:453"
	siteDataLayer     zaplog.Site = "runner/runner.go:764"
	siteLoadedOK      zaplog.Site = "runner/runner.go:825"
	siteLegacyAdmit   zaplog.Site = "runner/runner.go:956"
	siteTraceExporter zaplog.Site = "tracing/telemetry.go:128"
	siteScore         zaplog.Site = "scheduling/scheduler_profile.go:210"
)

// Main returns the epp program bound to deps.
func Main(deps Deps) proc.Main {
	return func(ctx context.Context, c *proc.Container) int {
		return (&eppProcess{deps: deps, c: c}).run(ctx)
	}
}

type eppProcess struct {
	deps    Deps
	c       *proc.Container
	sink    *zaplog.Sink
	root    zaplog.Logger
	setup   zaplog.Logger
	rand    *scheduling.Rand
	client  *http.Client
	approx  []*prefixcache.Approx
	precise []*prefixcache.Precise
}

func (e *eppProcess) run(ctx context.Context) int {
	c := e.c
	// InitSetupLogging: JSON at info until the flags set the verbosity.
	e.sink = zaplog.NewSink(c.Stderr, 0)
	e.root = e.sink.Logger()
	e.setup = e.root.WithName("setup")
	e.setup.Info(siteBuild, "GIE build", "commit-sha", CommitSHA, "build-ref", BuildRef)

	opts := options.New()
	flags := opts.FlagSet("epp", c.Stderr)
	if err := flags.Parse(c.Args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		// pflag.CommandLine is ExitOnError: usage, the error, exit 2.
		fmt.Fprint(c.Stderr, options.Usage(flags))
		fmt.Fprintln(c.Stderr, err)
		return 2
	}
	fsys := e.files()
	opts.Exists = func(p string) error {
		_, err := fs.Stat(fsys, strings.TrimPrefix(p, "/"))
		return err
	}
	if err := opts.Complete(); err != nil {
		return 1 // Run returns it unlogged; main exits 1.
	}
	if err := opts.Validate(); err != nil {
		e.setup.Error(siteValidate, err, "Failed to validate flags")
		return 1
	}
	e.setup.Info(siteFlags, "Flags processed", "flags", opts.Processed())
	e.sink.SetVerbosity(opts.LogVerbosity)
	if opts.Tracing {
		exporter := c.Env["OTEL_TRACES_EXPORTER"]
		if exporter == "" {
			exporter = "console"
		}
		e.setup.WithName("trace").Info(siteTraceExporter, "init OTel trace exporter", "type", exporter)
	}

	st, code := e.start(ctx, opts, fsys)
	if st == nil {
		return code
	}
	return e.serve(ctx, opts, st)
}

func (e *eppProcess) files() fs.FS {
	if e.deps.Files != nil {
		if f := e.deps.Files(e.c); f != nil {
			return f
		}
	}
	return emptyFS{}
}

type emptyFS struct{}

func (emptyFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// readConfig reads --config-file as os.ReadFile would report it.
func readConfig(fsys fs.FS, path string) ([]byte, error) {
	b, err := fs.ReadFile(fsys, strings.TrimPrefix(path, "/"))
	if err == nil {
		return b, nil
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("open %s: no such file or directory", path)
	case errors.Is(err, fs.ErrPermission):
		err = fmt.Errorf("open %s: permission denied", path)
	default:
		err = fmt.Errorf("read %s: %w", path, err)
	}
	return nil, err
}

// started is a loaded, not yet serving EPP.
type started struct {
	ds      *datalayer.Datastore
	srv     *server
	metrics *eppmetrics.Registry
	sources []*datalayer.Source
	extract []*datalayer.Extractor
	pool    string
	ns      string
}

var deploymentNameRE = regexp.MustCompile(`^(.+)-[a-z0-9]+-[a-z0-9]+$`)

// start runs the configuration phases and builds the server.
func (e *eppProcess) start(ctx context.Context, opts *options.Options, fsys fs.FS) (*started, int) {
	// parseConfigurationPhaseOne.
	var data []byte
	switch {
	case opts.ConfigText != "":
		data = []byte(opts.ConfigText)
	case opts.ConfigFile != "":
		var err error
		if data, err = readConfig(fsys, opts.ConfigFile); err != nil {
			err = fmt.Errorf("failed to load config from a file '%s' - %w", opts.ConfigFile, err)
			e.setup.Error(siteParseOne, err, "Failed to parse configuration")
			return nil, 1
		}
	}
	cfg, _, err := eppconfig.LoadRaw(data, e.root)
	if err != nil {
		e.setup.Error(siteParseOne, fmt.Errorf("failed to parse config - %w", err), "Failed to parse configuration")
		return nil, 1
	}
	e.setup.Info(siteDataLayer, "Data layer: ENABLED")

	// setup: ctrl.GetConfig succeeds in-cluster; the sim is the cluster.
	e.setup.Info(siteRawPhaseOne, "Raw config after phase one", "config", rawMap(cfg))
	pod := e.c.Env["POD_NAME"]
	if pod == "" {
		e.setup.Error(siteGKNN, errors.New("failed to get environment variable POD_NAME"), "Failed to extract GKNN")
		return nil, 1
	}
	m := deploymentNameRE.FindStringSubmatch(pod)
	if len(m) != 2 {
		e.setup.Error(siteGKNN, fmt.Errorf("failed to parse deployment name from pod name %s", pod), "Failed to extract GKNN")
		return nil, 1
	}
	st := &started{pool: m[1], ns: opts.Namespace(e.c.Env), metrics: eppmetrics.New()}
	st.ds = datalayer.NewDatastore(datalayer.Pool{Namespace: st.ns, Name: st.pool, Selector: opts.EndpointSelector,
		TargetPorts: opts.EndpointTargetPorts}, e.root.WithValues("controller", "pod", "controllerGroup", "", "controllerKind", "Pod"))

	// parseConfigurationPhaseTwo.
	seed := e.deps.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	e.rand = scheduling.NewRand(seed)
	e.client = e.deps.HTTPClient
	if e.client == nil {
		e.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	}
	h := eppconfig.NewHandle(ctx, e.root, st.metrics)
	factories := e.factories()
	loaded, err := eppconfig.Instantiate(cfg, factories, h)
	if err == nil {
		if perr := eppconfig.CreateMissingProducers(factories, h); perr != nil {
			err = fmt.Errorf("failed to create missing data producers - %w", perr)
		}
	} else {
		err = fmt.Errorf("failed to load the configuration - %w", err)
	}
	var producers []fw.Producer
	if err == nil {
		if producers, err = eppconfig.ProducerOrder(h); err != nil {
			err = fmt.Errorf("failed to load the configuration - %w", err)
		}
	}
	if err != nil {
		e.setup.Error(siteParseTwo, err, "Failed to parse configuration")
		return nil, 1
	}
	e.root.Info(siteLoadedOK, "loaded configuration from file/text successfully")
	sched := scheduling.NewScheduler(loaded, func(point string, tn fw.TypedName, d time.Duration) {
		st.metrics.Plugin(point, tn.Type, tn.Name, d)
	})
	if debug := e.root.V(zaplog.Debug); debug.Enabled() {
		sched.LogScores(func(tn fw.TypedName, ep *fw.Endpoint, score float64) {
			debug.Info(siteScore, "Calculated score", "plugin", tn.String(), "endpoint", ep.Meta.ID(), "score", score)
		})
	}
	e.setup.Info(sitePhaseTwo, "EPP config after phase two", "config", configString(loaded, h))

	st.metrics.Info(CommitSHA, BuildRef)
	st.metrics.Gatherer.MustRegister(&eppmetrics.PerEndpointQueue{
		Pool: func() (string, bool) { return st.pool, true },
		Endpoints: func() []eppmetrics.QueueSample {
			var out []eppmetrics.QueueSample
			for _, ep := range st.ds.List() {
				out = append(out, eppmetrics.QueueSample{EndpointName: ep.Meta.Name, Waiting: ep.Metrics().WaitingQueueSize})
			}
			return out
		},
	})
	if opts.EnablePprof {
		e.setup.Info(sitePprof, "Setting pprof handlers")
	}
	e.setup.Info(siteParsed, "parsed config", "scheduler-config", schedulerString(loaded))
	if err := eppconfig.CheckStability(h, opts.AllowExperimentalPlugins); err != nil {
		e.setup.Error(siteStability, err, "Plugin stability validation failed")
		return nil, 1
	}
	for _, s := range loaded.Sources {
		if src, ok := s.Plugin.(*datalayer.Source); ok {
			st.sources = append(st.sources, src)
			for _, x := range s.Extractors {
				if ex, ok := x.(*datalayer.Extractor); ok {
					st.extract = append(st.extract, ex)
				}
			}
		}
	}
	e.setup.Info(siteLegacyAdmit, "Flow Control layer is disabled via the flowControl feature gate, using legacy admission control")

	var pre []fw.PreRequest
	var types []string
	for _, p := range h.Plugins() {
		types = append(types, p.TypedName().Type)
		if pr, ok := p.(fw.PreRequest); ok {
			pre = append(pre, pr)
		}
	}
	st.srv = &server{log: e.root.WithName("ext-proc"), ds: st.ds, sched: sched, producers: producers, preRequest: pre,
		parsers: loaded.Parsers, metrics: st.metrics, rand: e.rand, tracing: opts.Tracing,
		obs: newObserver(st.ds, types)}
	return st, 0
}

// serve runs the servers and loops until ctx ends, then drains.
func (e *eppProcess) serve(ctx context.Context, opts *options.Options, st *started) int {
	c := e.c
	metricsLn, err := c.Listen(":" + strconv.Itoa(opts.MetricsPort))
	if err != nil {
		e.setup.Error(siteMgrError, err, "Error starting controller manager")
		return 1
	}
	healthLn, err := c.Listen(":" + strconv.Itoa(opts.GRPCHealthPort))
	if err != nil {
		metricsLn.Close()
		e.setup.Error(siteMgrError, err, "Error starting controller manager")
		return 1
	}
	// ext_proc's gRPC server on --grpc-port of the Pod's address, where
	// the envoy container's 127.0.0.1:9002 lands.
	grpcLn, err := c.Listen(":" + strconv.Itoa(opts.GRPCPort))
	if err != nil {
		metricsLn.Close()
		healthLn.Close()
		e.setup.Error(siteMgrError, err, "Error starting controller manager")
		return 1
	}
	addr := grpcLn.Addr().String()
	grpcSrv := extproc.Serve(grpcLn, st.srv)

	run, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	goRun := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	var src *datalayer.Source
	if len(st.sources) > 0 {
		src = st.sources[0]
	}
	coll := datalayer.NewCollectors(run, opts.RefreshMetricsInterval, src, st.extract, st.metrics)
	st.ds.AddHooks(coll)
	for _, p := range e.precise {
		st.ds.AddHooks(preciseHooks{p})
	}
	pods := e.podSource()
	goRun(func() { st.ds.Run(run, pods) })
	goRun(func() {
		datalayer.RunRefresher(run, st.ds, st.metrics, opts.RefreshPrometheusMetricsInterval, opts.MetricsStalenessThreshold, time.Now)
	})
	for _, a := range e.approx {
		goRun(func() {
			a.Run(run, func() map[string]bool {
				keep := map[string]bool{}
				for _, ep := range st.ds.List() {
					keep[ep.Meta.ID()] = true
				}
				return keep
			})
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(st.metrics.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	mux.Handle(ObserverPath, st.srv.obs)
	if opts.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	hs := &http.Server{Handler: c.Faults.Handler(opts.MetricsPort, mux), ReadHeaderTimeout: 10 * time.Second}
	goRun(func() { _ = hs.Serve(metricsLn) })
	// The gRPC health server answers the readiness probe; the sim accepts
	// TCP on the port once the EPP serves.
	goRun(func() {
		for {
			conn, err := healthLn.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	})
	e.setup.Info(siteMgrStart, "Controller manager starting")
	if e.deps.Started != nil {
		e.deps.Started(StartInfo{Pod: c.Pod.Name, Namespace: st.ns, Pool: st.pool, Seed: e.rand.Seed(), ExtProc: addr})
	}

	<-ctx.Done()
	e.setup.Info(siteDrain, "Shutdown signal received: draining (NotServing) while finishing in-flight requests", "drainTimeout", opts.DrainTimeout)
	e.setup.Info(siteMgrDone, "Controller manager terminated; starting drain window")
	// The EPP keeps serving ext_proc for --drain-timeout; the sim ends the
	// window early once no stream is open (the kubelet would otherwise
	// abandon the container after its grace period).
	deadline := time.Now().Add(opts.DrainTimeout)
	for st.srv.active.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st.srv.active.Load() > 0 {
		e.setup.Info(siteDrainElapsed, "Drain window elapsed, stopping ext_proc server")
	}
	grpcSrv.Stop()
	cancel()
	healthLn.Close()
	shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
	_ = hs.Shutdown(shutdown)
	done()
	wg.Wait()
	coll.Wait()
	return 0
}

type preciseHooks struct{ p *prefixcache.Precise }

func (h preciseHooks) Added(ep *datalayer.Endpoint)   { h.p.Watch(ep.Meta, true) }
func (h preciseHooks) Removed(ep *datalayer.Endpoint) { h.p.Watch(ep.Meta, false) }

func (e *eppProcess) podSource() datalayer.PodSource {
	if e.deps.Pods != nil {
		return e.deps.Pods(e.c)
	}
	return watcherSource{e.c.Pods}
}

// watcherSource adapts the kubelet's Pod watcher.
type watcherSource struct{ w proc.PodWatcher }

func (s watcherSource) Pods(ns string) []datalayer.Pod {
	if s.w == nil {
		return nil
	}
	var out []datalayer.Pod
	for _, p := range s.w.List(ns, nil) {
		out = append(out, datalayer.Pod{Name: p.Name, Namespace: p.Namespace, IP: p.IP, Labels: p.Labels,
			Annotations: p.Annotations, Ready: p.Ready && p.Phase == "Running", Deleting: p.Deleting})
	}
	return out
}

func (s watcherSource) Watch() (<-chan struct{}, func()) {
	if s.w == nil {
		return make(chan struct{}), func() {}
	}
	return s.w.Watch()
}

// rawMap is toRawMap: the config through JSON into a map.
func rawMap(cfg *eppconfig.EndpointPickerConfig) map[string]any {
	b, err := json.Marshal(cfg)
	if err != nil {
		return map[string]any{"error": fmt.Sprintf("failed to marshal raw config: %v", err)}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"error": fmt.Sprintf("failed to unmarshal raw config map: %v", err)}
	}
	return m
}

// schedulerString is SchedulerConfig.String: the handler's typed name and
// each profile as SchedulerProfile.String, in fmt's sorted map order.
func schedulerString(l *eppconfig.Loaded) string {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range l.Profiles {
			if !yield(n) {
				return
			}
		}
	})
	var parts []string
	for _, n := range names {
		p := l.Profiles[n]
		var filters, scorers []string
		for _, f := range p.Filters {
			filters = append(filters, f.TypedName().String())
		}
		for _, s := range p.Scorers {
			scorers = append(scorers, fmt.Sprintf("%s: %f", s.TypedName(), s.Weight))
		}
		picker := ""
		if p.Picker != nil {
			picker = p.Picker.TypedName().String()
		}
		parts = append(parts, fmt.Sprintf("%s:{Filters: [%s], Scorers: [%s], Picker: %s}", n,
			strings.Join(filters, ", "), strings.Join(scorers, ", "), picker))
	}
	return fmt.Sprintf("{ProfileHandler: %s, Profiles: map[%s]}", l.Handler.TypedName(), strings.Join(parts, " "))
}

// configString is config.Config.String ("%+v" of the struct): pointer
// fields print as addresses, which are this process's.
func configString(l *eppconfig.Loaded, h *eppconfig.Handle) string {
	var sources []string
	for _, s := range l.Sources {
		var ex []string
		for _, x := range s.Extractors {
			ex = append(ex, addr(x))
		}
		sources = append(sources, fmt.Sprintf("{Plugin:%s Extractors:[%s]}", addr(s.Plugin), strings.Join(ex, " ")))
	}
	return fmt.Sprintf("{SchedulerConfig:%s SaturationDetector:%s DataConfig:{Sources:[%s] Syncer:<nil> SyncInterval:0s} FlowControlConfig:<nil> ParserRegistry:%p}",
		schedulerString(l), addr(h.Plugin(eppconfig.TypeUtilizationDetector)), strings.Join(sources, " "), l)
}

// addr prints a field as %+v does at depth: pointers as addresses.
func addr(v any) string {
	if reflect.ValueOf(v).Kind() == reflect.Pointer {
		return fmt.Sprintf("%p", v)
	}
	return fmt.Sprintf("%+v", v)
}
