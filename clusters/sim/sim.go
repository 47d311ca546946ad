// Package sim is the embedded target: clusters.Cluster and
// clusters.Deployment implemented in-process. This package plays the API
// server (admission on create and update, the stored objects) and gives the
// specs a read-only view of each deployment; package controller runs the
// operator's reconcile loop, with the pure functions of package operator
// (admission, rendering, status), on a simulated kubelet (package kubelet)
// whose Pods run the router and engine emulators (package programs) as
// proc.Main programs, each on its own loopback IP with the real ports
// (engines 8000, routers 8081 and 9090). Imports run one way: sim ->
// controller -> programs, kubelet, operator.
//
// The sim is faithful, not convenient: argv, labels, selectors, phases and
// conditions are the operator's; a router edit replaces the router Pod; a
// crashing router shows RouterReady=False and CrashLoopBackOff. Times are
// scaled down (see package kubelet).
package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/sim/controller"
	"github.com/gpustack/routing-conformance/sim/engine"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/upstream"
)

// emulatorsNote says what runs on the sim.
const emulatorsNote = "vllm-router and sgl-model-gateway are their own clap binaries, built from their pinned sources " +
	"(make routers; docs/routers-from-source.md); the engines, the operator and llm-d-router are Go emulators; all on " +
	"loopback addresses; there is no GPU"

// LLMDRouterVersion is the llm-d-router the sim's epp and envoy emulate.
const LLMDRouterVersion = "llm-d-router v0.10.0 epp + envoy (simulated)"

// EngineKnobs become the engines' SIM_ENGINE_* environment when set; a role's
// own env entry of the same name wins.
type EngineKnobs struct {
	TTFT         time.Duration // SIM_ENGINE_TTFT
	ITL          time.Duration // SIM_ENGINE_ITL
	OutputTokens int           // SIM_ENGINE_OUTPUT_TOKENS
	StartupDelay time.Duration // SIM_ENGINE_STARTUP_DELAY
}

func (k EngineKnobs) env() map[string]string {
	out := map[string]string{}
	if k.TTFT > 0 {
		out[engine.EnvTTFT] = k.TTFT.String()
	}
	if k.ITL > 0 {
		out[engine.EnvITL] = k.ITL.String()
	}
	if k.OutputTokens > 0 {
		out[engine.EnvOutputTokens] = fmt.Sprint(k.OutputTokens)
	}
	if k.StartupDelay > 0 {
		out[engine.EnvStartupDelay] = k.StartupDelay.String()
	}
	return out
}

// Options configure a Cluster. Zero values take the documented defaults.
type Options struct {
	// Namespace names the namespace of a deployment that names none
	// (default "sim-" and five random characters per deployment).
	Namespace func() string
	// Programs overrides the emulators field by field; a nil field runs the
	// sim's own (programs.New wired to this cluster: one KV-event bus for
	// the vLLM publishers and the EPPs, Service names resolved for the EPP,
	// the EPPs' seeds kept for PickerSeeds).
	Programs programs.Registry
	// Engine sets the engines' latency knobs for every deployment.
	Engine EngineKnobs
	// EngineVersions is what Describe reports per engine when a spec names
	// no version (default vLLM 0.29.0, SGLang 0.5.18).
	EngineVersions map[string]string
	// Kubelet tunes back-off and carries the log and event sinks.
	Kubelet kubelet.Options
	// Timing is the scaled clock of every deployment's operator loop and
	// Pods (controller.Timing: its zero durations take the defaults).
	controller.Timing
	// TestOnlyReplaceEnginesOnRouterEdit makes the emulated operator delete
	// every engine Pod of a deployment whose spec.router is edited, which
	// the real one does not (docs/operator.md#router-edits): for testing
	// the suite's guard over its own edits. Off by default.
	TestOnlyReplaceEnginesOnRouterEdit bool
	// PickerSeed seeds the random tie-break of every llm-d EPP's
	// max-score-picker; 0 lets each EPP seed from the clock as the real one
	// does. Either way Deployment.PickerSeeds reports the seed each EPP used.
	PickerSeed uint64
	// Routers runs the binaries make routers built (package upstream) as
	// the router containers of vllm-router and sglang-gateway, with static
	// worker lists (the sim has no Kubernetes API). Nil: those pairs are
	// not supported, with the reason (no router of theirs is emulated). A
	// Programs field set for one of those routers wins.
	Routers *upstream.Install
	// LLMD, when set, runs llm-d-router's own EPP (make upstream-llmd) as
	// the llm-d-router pairs' epp container (sim.llmd: upstream), with
	// file discovery from the kubelet's Pods (docs/upstream-llmd.md). Nil:
	// the emulated EPP. A Programs.EPP set wins.
	LLMD *upstream.EPPInstall
}

func (o Options) withDefaults() Options {
	if o.Namespace == nil {
		o.Namespace = func() string { return kubelet.GenerateName("sim-") }
	}
	if o.EngineVersions == nil {
		o.EngineVersions = map[string]string{api.EngineVLLM: "0.29.0", api.EngineSGLang: "0.5.18"}
	}
	o.Timing = o.Timing.WithDefaults()
	return o
}

// Cluster is the sim target. Create it with New and release it with Close.
type Cluster struct {
	opts Options
	kube *kubelet.Kubelet
	http *http.Client

	mu          sync.Mutex
	closed      bool
	deployments map[string]*deployment // namespace/name
	// seeds are the EPPs' picker seeds by namespace/pod.
	seeds map[string]uint64
}

var _ clusters.Cluster = (*Cluster)(nil)

// New starts an empty sim cluster.
func New(opts Options) *Cluster {
	opts = opts.withDefaults()
	c := &Cluster{
		opts:        opts,
		deployments: map[string]*deployment{},
		seeds:       map[string]uint64{},
	}
	kopts := opts.Kubelet
	kopts.ConfigMaps = c.configMap
	userEvents, userStatus := kopts.EventSink, kopts.StatusSink
	kopts.EventSink = func(e kubelet.Event) {
		if p, ok := c.kube.Get(e.Namespace, e.Pod); ok {
			if d := c.owner(p); d != nil {
				d.ctrl.Record(e)
			}
		}
		if userEvents != nil {
			userEvents(e)
		}
	}
	kopts.StatusSink = func(u kubelet.PodUpdate) {
		if d := c.owner(u.Pod); d != nil {
			d.podChanged(u)
		}
		if userStatus != nil {
			userStatus(u)
		}
	}
	c.kube = kubelet.New(kopts)
	if in := opts.Routers; in != nil {
		opts.Programs = opts.Programs.Merge(programs.Registry{
			VLLMRouter:    in.Program(api.RouterVLLM, upstream.Options{}),
			SGLangGateway: in.Program(api.RouterSGLang, upstream.Options{}),
		})
	}
	if in := opts.LLMD; in != nil {
		opts.Programs = opts.Programs.Merge(programs.Registry{
			EPP: in.EPPProgram(upstream.EPPOptions{Resolve: func(_ context.Context, svc, ns, port string) (string, error) {
				ip, err := c.resolveService(svc, ns)
				if err != nil {
					return "", err
				}
				return net.JoinHostPort(ip, port), nil
			}}),
		})
	}
	// The programs that talk outside HTTP get this cluster: Service names
	// resolved by the EPP's client, EPP seeds kept. (KV events need
	// nothing: they travel over real ZMQ between the Pods' addresses.)
	c.opts.Programs = opts.Programs.Merge(programs.New(programs.Deps{
		HTTPClient: c.serviceClient(), PickerSeed: opts.PickerSeed,
		EPPStarted: c.eppStarted,
	}))
	c.http = &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     2 * time.Second,
		},
	}
	return c
}

// get reads url with the sim's client, within timeout and up to limit
// bytes; an answer other than 200 is an error naming its status.
func (c *Cluster) get(ctx context.Context, url string, timeout time.Duration, limit int64) ([]byte, error) {
	return controller.HTTPGet(c.http)(ctx, url, timeout, limit)
}

// Kubelet exposes the simulated node, for tests and the CLI.
func (c *Cluster) Kubelet() *kubelet.Kubelet { return c.kube }

// Describe reports the sim's versions and which pairs it can run.
func (c *Cluster) Describe(ctx context.Context) (clusters.Environment, error) {
	p := c.opts.Programs
	llmd := LLMDRouterVersion
	if c.opts.LLMD != nil {
		llmd = "llm-d-router " + c.opts.LLMD.Version + " epp built from source @" + c.opts.LLMD.RouterCommit + ", envoy (simulated)"
	}
	env := clusters.Environment{
		Target:          config.TargetSim,
		OperatorVersion: "gpustack-operator (admission, rendering and status emulated by sim/operator)",
		RouterImage: fmt.Sprintf("%s (not run: vllm-router and sgl-model-gateway are built from source, llm-d-router is %s)",
			operator.DefaultRouterImage, llmd),
		EngineImages: map[string]string{},
		Notes: []string{
			llmd,
			emulatorsNote,
			"times are scaled: probes every " + c.opts.ProbePeriod.String() + ", restart back-off from " +
				durationOr(c.opts.Kubelet.BackoffInitial, kubelet.DefaultBackoffInitial).String(),
		},
	}
	c.describeRouters(&env)
	for _, e := range slices.Sorted(maps.Keys(c.opts.EngineVersions)) {
		v := c.opts.EngineVersions[e]
		env.EngineImages[e] = operator.SynthesizedImage(e, v) + " (simulated)"
		env.Notes = append(env.Notes, fmt.Sprintf("%s %s (simulated)", e, v))
	}
	for _, router := range api.Routers {
		for _, engine := range api.Engines {
			pair := clusters.PairSupport{Pair: api.Pair{Router: router, Engine: engine}}
			rm, rbin := p.Router(router)
			em, ebin := p.Engine(engine)
			switch {
			case !slices.Contains(operator.RouterEngines[router], engine):
				pair.Reason = operator.RouterEngineMismatch(router, engine)
			case rm == nil && upstream.Supports(router):
				pair.Reason = fmt.Sprintf("%s runs as its binary built from source, and this sim was given no build: run `%s`", rbin, upstream.InstallCommand)
			case rm == nil:
				pair.Reason = fmt.Sprintf("no %s program is registered in this build of the sim", rbin)
			case em == nil:
				pair.Reason = fmt.Sprintf("no %s program is registered in this build of the sim", ebin)
			default:
				pair.Supported = true
				pair.RouterCode = c.routerCode(router)
			}
			env.Pairs = append(env.Pairs, pair)
		}
	}
	return env, ctx.Err()
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Deploy admits md as the operator would and starts reconciling it. An
// admission refusal is a *clusters.AdmissionError and creates nothing.
func (c *Cluster) Deploy(ctx context.Context, md *api.ModelDeployment) (clusters.Deployment, error) {
	if md == nil {
		return nil, errors.New("deploy: no ModelDeployment given")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	md = operator.DeepCopy(md)
	if md.APIVersion == "" {
		md.APIVersion = api.APIVersion
	}
	if md.Kind == "" {
		md.Kind = api.Kind
	}
	if md.Kind != api.Kind || (md.APIVersion != api.APIVersion && md.APIVersion != api.Group+"/v1") {
		return nil, fmt.Errorf("deploy: the sim serves kind %s in %s (or %s/v1), not kind %q in %q",
			api.Kind, api.APIVersion, api.Group, md.Kind, md.APIVersion)
	}
	if md.Metadata.Namespace == "" {
		md.Metadata.Namespace = c.opts.Namespace()
	}
	md.Status = api.ModelDeploymentStatus{}
	if err := operator.Admit(nil, md); err != nil {
		return nil, err
	}
	operator.Default(md)
	if err := c.runnable(md); err != nil {
		return nil, err
	}

	key := md.Metadata.Namespace + "/" + md.Metadata.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("deploy: the sim cluster is closed")
	}
	for k, d := range c.deployments {
		if d.ctrl.Gone() {
			delete(c.deployments, k)
		}
	}
	if _, exists := c.deployments[key]; exists {
		return nil, fmt.Errorf("modeldeployments.%s %q already exists in namespace %q", api.Group,
			md.Metadata.Name, md.Metadata.Namespace)
	}
	now := time.Now()
	md.Metadata.UID = kubelet.NewUID()
	md.Metadata.Generation = 1
	md.Metadata.ResourceVersion = "1"
	md.Metadata.CreationTimestamp = now.UTC().Format(time.RFC3339)
	d := &deployment{name: md.Metadata.Name, namespace: md.Metadata.Namespace, kube: c.kube, http: c.http,
		get: c.get, admit: c.admitUpdate, seed: c.seed, ctrl: controller.New(c.controllerConfig(), md)}
	c.deployments[key] = d
	d.ctrl.Start()
	return d, nil
}

func (c *Cluster) controllerConfig() controller.Config {
	return controller.Config{
		Kubelet: c.kube, Programs: c.opts.Programs, EngineEnv: c.opts.Engine.env(),
		Timing: c.opts.Timing, Get: c.get,
		TestOnlyReplaceEnginesOnRouterEdit: c.opts.TestOnlyReplaceEnginesOnRouterEdit,
	}
}

// admitUpdate is the API server's admission of an update: the webhook, its
// defaults, and what the sim can run.
func (c *Cluster) admitUpdate(old, next *api.ModelDeployment) error {
	if err := operator.Admit(old, next); err != nil {
		return err
	}
	operator.Default(next)
	return c.runnable(next)
}

// owner is the live deployment a Pod belongs to, by its namespace and
// instance label (nil for none).
func (c *Cluster) owner(p kubelet.PodStatus) *deployment {
	name, ok := p.Labels[api.LabelInstance]
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deployments[p.Namespace+"/"+name]
}

// runnable refuses what the sim cannot run, after admission has passed.
func (c *Cluster) runnable(md *api.ModelDeployment) error {
	if md.Spec.Router != nil {
		if m, bin := c.opts.Programs.Router(md.Spec.Router.Name); m == nil && upstream.Supports(md.Spec.Router.Name) {
			return fmt.Errorf("sim target: %s runs as its binary built from source, and this sim was given none: run `%s` and pass the build as sim.Options.Routers", bin, upstream.InstallCommand)
		} else if m == nil {
			return fmt.Errorf("sim target: no %s program is registered; set sim.Options.Programs", bin)
		}
	}
	if m, prog := c.opts.Programs.Engine(md.Spec.Engine.Name); m == nil {
		return fmt.Errorf("sim target: no %q program is registered; set sim.Options.Programs", prog)
	}
	return nil
}

// Close deletes every deployment, stops every Pod and waits for them.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	ds := slices.Collect(maps.Values(c.deployments))
	c.mu.Unlock()
	var errs []error
	for _, d := range ds {
		d.ctrl.Delete()
	}
	for _, d := range ds {
		if err := d.waitGone(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.kube.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	c.http.CloseIdleConnections()
	return errors.Join(errs...)
}
