package difftest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim/engine"
	"github.com/gpustack/routing-conformance/clusters/sim/kubelet"
	"github.com/gpustack/routing-conformance/clusters/sim/operator"
	"github.com/gpustack/routing-conformance/clusters/sim/proc"
	"github.com/gpustack/routing-conformance/clusters/sim/programs"
	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
)

// Model is the model every case serves (the suite's default).
const Model = "Qwen/Qwen2.5-0.5B-Instruct"

// Implementations of a router, in the order a case runs them.
const (
	Emulated = "emulated"
	Upstream = "upstream"
)

// Setup is what one case deploys: one ModelDeployment's engines and, in
// front of them, the emulated and the upstream router from the same
// rendered argv.
type Setup struct {
	// Router is api.RouterVLLM or api.RouterSGLang (its engine is the pair's:
	// vLLM or SGLang).
	Router string
	// PD deploys a Prefill and a Decode role (else one Server role).
	PD bool
	// Workers is the number of engines per role.
	Workers int
	// Args is spec.router.extraArgs: the policy and its knobs.
	Args []string
	// Refused: the upstream launcher is expected to refuse Args (Deploy
	// returns once it started; Exit waits for its end).
	Refused bool
}

// Engine is one engine Pod of a Deployment.
type Engine struct {
	// Label names it in tables: "<pool>-<ordinal>", e.g. server-1.
	Label string
	// Pool is regular, prefill or decode.
	Pool string
	URL  string
	Pod  kubelet.PodStatus
	kind string // api.EngineVLLM or api.EngineSGLang
}

// Router is one router Pod of a Deployment.
type Router struct {
	Impl string // Emulated or Upstream
	Pod  kubelet.PodStatus
}

// Base is the router's serving address, http://<Pod IP>:8081.
func (r *Router) Base() string { return "http://" + r.Pod.IP + ":" + strconv.Itoa(api.RouterHTTPPort) }

// Deployment is a Setup running on a kubelet.
type Deployment struct {
	Setup   Setup
	MD      *api.ModelDeployment
	Engines []Engine // in creation (registration) order
	Routers []*Router
	// Argv is the router container's rendered argv.
	Argv []string
	k    *kubelet.Kubelet
}

// Pools are the worker pools requests are routed over, in order.
func (d *Deployment) Pools() []string {
	if d.Setup.PD {
		return []string{poolPrefill, poolDecode}
	}
	return []string{poolRegular}
}

const (
	poolRegular = "regular"
	poolPrefill = "prefill"
	poolDecode  = "decode"
)

// emulatedSeed fixes the emulated vllm-router's candidate order and random
// draws (SIM_ROUTER_SEED), so a failure reruns the same; the upstream order
// is whatever its process draws, which is why picks are compared by
// candidate position.
const emulatedSeed = "20261204"

// engineEnv are the sim engines' latency knobs: a request of max_tokens n
// is answered about 5 ms + n ms after admission, so a held request
// (Hold) stays in flight for HoldTokens milliseconds.
var engineEnv = map[string]string{engine.EnvTTFT: "5ms", engine.EnvITL: "1ms"}

// timeouts of the set-up steps.
const (
	readyTimeout    = 60 * time.Second
	registerTimeout = 30 * time.Second
)

func modelDeployment(namespace string, s Setup) *api.ModelDeployment {
	eng := api.EngineVLLM
	if s.Router == api.RouterSGLang {
		eng = api.EngineSGLang
	}
	n := int32(s.Workers)
	role := func(name, kind string) api.Role {
		return api.Role{Name: name, Kind: kind, Replicas: &n, InstanceType: "sim-gpu"}
	}
	roles := []api.Role{role("server", api.RoleKindServer)}
	if s.PD {
		roles = []api.Role{role("prefill", api.RoleKindPrefill), role("decode", api.RoleKindDecode)}
	}
	return &api.ModelDeployment{
		APIVersion: api.APIVersion, Kind: api.Kind,
		Metadata: api.ObjectMeta{Name: "md", Namespace: namespace},
		Spec: api.ModelDeploymentSpec{
			Model:  api.Model{Name: Model},
			Engine: api.Engine{Name: eng},
			Roles:  roles,
			Router: &api.Router{Name: s.Router, ExtraArgs: slices.Clone(s.Args)},
		},
	}
}

// Deploy runs s in namespace on k: the emulated router first, then the
// engines one at a time, each registered with the emulated router before
// the next starts (so its registration order is the creation order), then
// the upstream router, whose static worker list names the same engines in
// the same order (the static-workers translation lists them by name).
func Deploy(ctx context.Context, k *kubelet.Kubelet, in *upstream.Install, namespace string, s Setup) (*Deployment, error) {
	md := modelDeployment(namespace, s)
	w, err := operator.RenderRouter(md)
	if err != nil {
		return nil, err
	}
	d := &Deployment{Setup: s, MD: md, Argv: w.Args, k: k}
	reg := programs.Default()
	emulatedMain, _ := reg.Router(s.Router)
	emu, err := d.startRouter(w, Emulated, emulatedMain, map[string]string{"SIM_ROUTER_SEED": emulatedSeed})
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, k, emu.Pod); err != nil {
		return nil, d.describe(err, emu)
	}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		for ord := range s.Workers {
			e, err := d.startEngine(reg, role, ord)
			if err != nil {
				return nil, err
			}
			if err := waitReady(ctx, k, e.Pod); err != nil {
				return nil, fmt.Errorf("engine %s: %w", e.Label, err)
			}
			if err := d.waitRegistered(ctx, emu, len(d.Engines)); err != nil {
				return nil, d.describe(err, emu)
			}
		}
	}
	up, err := d.startRouter(w, Upstream, in.Program(s.Router, upstream.Options{}), nil)
	if err != nil {
		return nil, err
	}
	if s.Refused {
		return d, nil
	}
	if err := waitReady(ctx, k, up.Pod); err != nil {
		return nil, d.describe(err, up)
	}
	if err := d.waitRegistered(ctx, up, len(d.Engines)); err != nil {
		return nil, d.describe(err, up)
	}
	return d, nil
}

func (d *Deployment) startRouter(w operator.RouterWorkload, impl string, main proc.Main, env map[string]string) (*Router, error) {
	st, err := d.k.Create(kubelet.PodSpec{
		Name: w.Name + "-" + impl, Namespace: d.MD.Metadata.Namespace, Labels: w.Labels,
		TerminationGracePeriod: 10 * time.Second,
		Containers: []kubelet.ContainerSpec{{
			Name: api.ContainerRouter, Command: w.Command, Args: slices.Clone(w.Args), Env: env,
			Ports: []int{api.RouterHTTPPort, api.RouterMetricsPort}, WatchPods: true, Main: main,
			ReadinessProbe: &kubelet.Probe{TCPPort: api.RouterHTTPPort, Period: 20 * time.Millisecond, FailureThreshold: 3},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("%s router: %w", impl, err)
	}
	r := &Router{Impl: impl, Pod: st}
	d.Routers = append(d.Routers, r)
	return r, nil
}

func (d *Deployment) startEngine(reg programs.Registry, role *api.Role, ord int) (Engine, error) {
	w, err := operator.RenderEngine(d.MD, role, ord)
	if err != nil {
		return Engine{}, err
	}
	main := reg.Command(w.Program)
	if main == nil {
		return Engine{}, fmt.Errorf("no sim program runs %q", strings.Join(w.Program, " "))
	}
	env := map[string]string{}
	for k, v := range engineEnv {
		env[k] = v
	}
	for _, e := range w.Env {
		env[e.Name] = e.Value
	}
	ports := []int{int(w.Port)}
	for _, p := range w.ExtraPorts {
		ports = append(ports, int(p))
	}
	pool := operator.UpstreamKind(role.RoleKind())
	if pool == "server" {
		pool = poolRegular
	}
	st, err := d.k.Create(kubelet.PodSpec{
		// Names sort in creation order, as the static-workers row lists them.
		Name: fmt.Sprintf("%s-%s-%d", d.MD.Metadata.Name, role.Name, ord), Namespace: d.MD.Metadata.Namespace,
		Labels: w.Labels, Annotations: w.Annotations,
		Containers: []kubelet.ContainerSpec{{
			Name: w.Container, Command: w.Command, Args: w.Args, Env: env, Ports: ports, Main: main,
			ReadinessProbe: &kubelet.Probe{HTTPPath: w.ProbePath, HTTPPort: int(w.ProbePort), Period: 20 * time.Millisecond, FailureThreshold: 3},
		}},
	})
	if err != nil {
		return Engine{}, fmt.Errorf("engine %s-%d: %w", role.Name, ord, err)
	}
	e := Engine{Label: fmt.Sprintf("%s-%d", role.Name, ord), Pool: pool, Pod: st,
		URL: "http://" + st.IP + ":" + strconv.Itoa(int(w.Port)), kind: d.MD.Spec.Engine.Name}
	d.Engines = append(d.Engines, e)
	return e, nil
}

func waitReady(ctx context.Context, k *kubelet.Kubelet, st kubelet.PodStatus) error {
	return poll(ctx, readyTimeout, "Pod "+st.Name+" Ready", func() (bool, error) {
		p, ok := k.Get(st.Namespace, st.Name)
		if !ok {
			return false, fmt.Errorf("Pod %s is gone", st.Name)
		}
		for _, c := range p.Containers {
			if c.LastTermination != nil || c.Terminated != nil {
				return false, fmt.Errorf("Pod %s: container %s exited", st.Name, c.Name)
			}
		}
		return p.Ready, nil
	})
}

// waitRegistered waits until the router lists n healthy workers: the
// engines' URLs on vllm-router's GET /list_workers, or healthy on
// sgl-model-gateway's GET /workers.
func (d *Deployment) waitRegistered(ctx context.Context, r *Router, n int) error {
	want := make([]string, 0, n)
	for _, e := range d.Engines[:n] {
		want = append(want, e.URL)
	}
	return poll(ctx, registerTimeout, fmt.Sprintf("the %s router to register %d workers", r.Impl, n), func() (bool, error) {
		got, err := d.listed(r)
		if err != nil {
			return false, nil
		}
		for _, u := range want {
			if !slices.Contains(got, u) {
				return false, nil
			}
		}
		return true, nil
	})
}

// listed are the healthy workers' URLs in the order the router lists them:
// vllm-router's GET /list_workers and sgl-model-gateway's GET /workers
// both walk the registry's DashMap (get_all_urls, get_all_with_ids).
func (d *Deployment) listed(r *Router) ([]string, error) {
	if d.Setup.Router == api.RouterVLLM {
		var v struct {
			URLs []string `json:"urls"`
		}
		if err := getJSON(r.Base()+"/list_workers", &v); err != nil {
			return nil, err
		}
		return v.URLs, nil
	}
	var v struct {
		Workers []struct {
			URL     string `json:"url"`
			Healthy bool   `json:"is_healthy"`
		} `json:"workers"`
	}
	if err := getJSON(r.Base()+"/workers", &v); err != nil {
		return nil, err
	}
	var out []string
	for _, w := range v.Workers {
		if w.Healthy {
			out = append(out, w.URL)
		}
	}
	return out, nil
}

var client = &http.Client{Timeout: 30 * time.Second}

func getJSON(url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// describe adds the router's log tail to err.
func (d *Deployment) describe(err error, r *Router) error {
	logs, _ := d.k.Logs(r.Pod.Namespace, r.Pod.Name, api.ContainerRouter, false, time.Time{})
	lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return fmt.Errorf("%s router: %w; log tail:\n  %s", r.Impl, err, strings.Join(lines, "\n  "))
}

// fault makes the engines at candidate positions pos (comma-separated) of
// r's order answer status to every inference request until lift is
// called.
func (d *Deployment) fault(r *Router, pos string, status int) (lift func(), err error) {
	orders, err := d.Orders(r)
	if err != nil {
		return nil, err
	}
	var lifts []func()
	lift = func() {
		for _, l := range lifts {
			l()
		}
	}
	for _, want := range strings.Split(pos, ",") {
		e, ok := d.atPosition(orders, want)
		if !ok {
			lift()
			return nil, fmt.Errorf("no engine at candidate position %s", want)
		}
		port, _ := strconv.Atoi(e.URL[strings.LastIndexByte(e.URL, ':')+1:])
		l, err := d.k.InjectHTTPFault(e.Pod.Namespace, e.Pod.Name, proc.HTTPFault{Port: port, PathPrefix: "/v1/", Status: status,
			Body: `{"error":{"message":"injected","type":"InternalServerError","code":` + strconv.Itoa(status) + `}}`})
		if err != nil {
			lift()
			return nil, err
		}
		lifts = append(lifts, l)
	}
	return lift, nil
}

// atPosition is the engine at a candidate position such as r0 or p1.
func (d *Deployment) atPosition(orders map[string]Order, pos string) (Engine, bool) {
	for _, pool := range d.Pools() {
		for i, label := range orders[pool].Labels {
			if pool[:1]+strconv.Itoa(i) == pos {
				return d.engineByLabel(label)
			}
		}
	}
	return Engine{}, false
}

func (d *Deployment) engineByLabel(label string) (Engine, bool) {
	for _, e := range d.Engines {
		if e.Label == label {
			return e, true
		}
	}
	return Engine{}, false
}

// Exit waits for the router's container to end and returns its exit code.
func (d *Deployment) Exit(ctx context.Context, r *Router) (int32, error) {
	var code int32
	err := poll(ctx, readyTimeout, "the "+r.Impl+" router to exit", func() (bool, error) {
		p, ok := d.k.Get(r.Pod.Namespace, r.Pod.Name)
		if !ok {
			return false, fmt.Errorf("Pod %s is gone", r.Pod.Name)
		}
		for _, c := range p.Containers {
			if t := c.LastTermination; t != nil {
				code = t.ExitCode
				return true, nil
			}
			if t := c.Terminated; t != nil {
				code = t.ExitCode
				return true, nil
			}
		}
		return false, nil
	})
	return code, err
}

// Logs is the router container's log.
func (d *Deployment) Logs(r *Router) string {
	logs, _ := d.k.Logs(r.Pod.Namespace, r.Pod.Name, api.ContainerRouter, false, time.Time{})
	return logs
}

// poll calls cond every 10 ms until it is true, errs, or within passes.
func poll(ctx context.Context, within time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s", within, what)
		case <-t.C:
		}
	}
}
