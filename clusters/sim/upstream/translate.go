package upstream

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim/proc"
)

// Translation is one named rewrite of the argv the operator renders for a
// router container, made so the upstream launcher runs the same router
// here. Everything no row rewrites reaches the launcher as rendered, so
// the launcher's own front end (argparse: its errors, its choices) answers
// it: those differences are the suite's findings, not translations.
type Translation struct {
	// Name is the row's one name (tests and docs refer to it).
	Name string
	// Routers are the routers the row applies to.
	Routers []string
	// Static rows apply only when the router has no Kubernetes API to
	// discover workers with (Options.Kubeconfig empty).
	Static bool
	// Rendered is what the operator renders; Upstream what runs instead.
	Rendered, Upstream string
	// Why justifies the row; Cite is the upstream source it rests on
	// (repo@tag:path).
	Why, Cite string

	apply func(t *translating) error
}

// Translations is the one table from rendered argv to launcher argv, in
// the order the rows apply.
var Translations = []Translation{
	{
		Name: "launcher", Routers: []string{api.RouterVLLM, api.RouterSGLang},
		Rendered: "vllm-router ARGS / sgl-model-gateway ARGS (the image's clap binaries)",
		Upstream: "python -m vllm_router.launch_router ARGS / python -m sglang_router.launch_router ARGS",
		Why: "the wheels hold the same Rust library and an argparse launcher that ends in the library's own server startup; " +
			"the clap [[bin]] targets of Cargo.toml are not in the wheels",
		Cite:  "vllm-project/router@v0.1.15:setup.py; sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/bindings/python/pyproject.toml",
		apply: func(*translating) error { return nil }, // the command, not an argument: see command
	},
	{
		Name: "bind-address", Routers: []string{api.RouterVLLM, api.RouterSGLang},
		Rendered: "--host=0.0.0.0 --prometheus-host=0.0.0.0",
		Upstream: "--host=<Pod loopback> --prometheus-host=<Pod loopback>",
		Why: "the sim's Pods share one network namespace, each with its own address; the process binds the Pod's private " +
			"loopback address and the kubelet serves the Pod IP's 8081 and 9090 in front of it (where injected HTTP faults act, " +
			"as a chaos proxy in a Pod's network does) once the process has bound them. The banner names that address instead of 0.0.0.0",
		Cite:  "vllm-project/router@v0.1.15:src/server.rs (binds host:port as given)",
		apply: bindLoopback,
	},
	{
		Name: "startup-check-interval", Routers: []string{api.RouterVLLM},
		Rendered: "(nothing)",
		Upstream: "--worker-startup-check-interval=1",
		Why: "vllm-router binds its port only after its workers answer GET /health, re-checking every 30 s by default " +
			"(clap and launcher alike); a sim engine a few milliseconds late would hold the router 30 s. It changes when, not what",
		Cite:  "vllm-project/router@v0.1.15:src/routers/http/router.rs (wait_for_healthy_workers), src/main.rs (default 30)",
		apply: addIfAbsent("--worker-startup-check-interval", "1"),
	},
	{
		Name: "eviction-interval", Routers: []string{api.RouterSGLang},
		Rendered: "--eviction-interval N (clap; default 120)",
		Upstream: "--eviction-interval-secs N (launcher; its default 60, so 120 is passed when none is rendered)",
		Why:      "the launcher spells the flag differently and defaults to 60 s where the operator's clap binary defaults to 120 s",
		Cite:     "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/main.rs (eviction_interval, 120); bindings/python/src/sglang_router/router_args.py (eviction_interval_secs, 60)",
		apply:    evictionInterval,
	},
	{
		Name: "igw", Routers: []string{api.RouterSGLang},
		Rendered: "--service-discovery",
		Upstream: "--service-discovery --enable-igw",
		Why: "the clap binary turns IGW (multi-model gateway) mode on whenever service discovery is on, before building its " +
			"config; the launcher does not, so the flag is passed to run the mode the operator's router runs",
		Cite:  "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/main.rs (main: \"IGW mode automatically enabled\")",
		apply: igw,
	},
	{
		Name: "harmony-vocab", Routers: []string{api.RouterSGLang},
		Rendered: "(nothing)",
		Upstream: "TIKTOKEN_ENCODINGS_BASE=<install>/tiktoken in the environment",
		Why: "in IGW mode the gateway builds its gRPC routers at startup, which load the o200k_base vocab through openai-harmony " +
			"from openaipublic.blob.core.windows.net and panic without it; no such host is reachable here, so the same file " +
			"(sha256-checked by harmony and by make upstream-routers, taken from the tiktoken-rs crate) is named by the variable " +
			"harmony reads first. A cluster without that host needs the same (docs/upstream-routers.md)",
		Cite:  "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/routers/grpc/harmony/builder.rs; openai/harmony@v0.0.4:src/tiktoken_ext/public_encodings.rs",
		apply: harmonyVocab,
	},
	{
		Name: "hub-offline", Routers: []string{api.RouterVLLM, api.RouterSGLang},
		Rendered: "(nothing)",
		Upstream: "HF_ENDPOINT=http://<Pod loopback>:<port that closes every connection> HF_HOME=<install>/hf-home in the environment",
		Why: "sgl-model-gateway registers a tokenizer for each new worker's model, from the tokenizer_path or model_path its " +
			"/server_info reports (the sim's SGLang engine reports both, as SGLang does), downloading it from the Hugging Face hub; " +
			"the suite's network traffic stays on loopback, so the hub is named at a port of the Pod's loopback that closes every " +
			"connection: the download fails at once, and the gateway logs a warning and registers the worker (the step is not fatal), as on a cluster that cannot " +
			"reach the hub. HF_HOME keeps a user's hub cache out. Its HTTP routers and policies never read the tokenizer, so " +
			"routing is the same either way; vllm-router links the same hub client and gets the same environment",
		Cite: "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/core/steps/worker/local/register_tokenizer.rs, " +
			"src/tokenizer/hub.rs (ApiBuilder::from_env); huggingface/hf-hub@v0.4.3:src/api/tokio.rs (HF_ENDPOINT, HF_HOME)",
		apply: hubOffline,
	},
	{
		Name: "static-workers", Routers: []string{api.RouterVLLM, api.RouterSGLang}, Static: true,
		Rendered: "--service-discovery --service-discovery-namespace=NS --service-discovery-port=P --selector K=V... " +
			"(or --prefill-selector/--decode-selector)",
		Upstream: "vllm-router: --worker-urls http://IP:P ... (or --prefill http://IP:P [bootstrap port] ... --decode http://IP:P ...); " +
			"sglang-gateway (IGW, which ignores --worker-urls): POST /workers per Pod once the port is bound, with the body its " +
			"discovery builds; for the Pods the selectors match when the container starts, in name order (a real API server's list order)",
		Why: "service discovery needs a Kubernetes API and the plain sim has none; the Pods a fixed list names are those of " +
			"the container's start, so a claim that replaces an engine Pod under a running router (killengine) is skipped there, " +
			"and the API-server tier runs it with the routers' own discovery (MembershipClaims)",
		Cite: "vllm-project/router@v0.1.15:src/service_discovery.rs; sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/service_discovery.rs " +
			"(handle_pod_event: Job::AddWorker with the router's health settings), src/server.rs (POST /workers submits the same job)",
		apply: staticWorkers,
	},
}

// Plan is how one router container runs upstream.
type Plan struct {
	// Args is the launcher's argv.
	Args []string
	// Env is added to the process's environment.
	Env map[string]string
	// Register are the workers to add through the router's own worker API
	// once its port is bound, in order (sglang-gateway's static workers).
	Register []Registration
	// Rows are the names of the Translations that changed something.
	Rows []string
}

// Registration is one POST /workers body of sgl-model-gateway, as its
// service discovery builds the job for a Pod.
type Registration struct {
	URL                     string  `json:"url"`
	WorkerType              *string `json:"worker_type,omitempty"`
	BootstrapPort           *int    `json:"bootstrap_port,omitempty"`
	HealthCheckTimeoutSecs  int     `json:"health_check_timeout_secs"`
	HealthCheckIntervalSecs int     `json:"health_check_interval_secs"`
	HealthSuccessThreshold  int     `json:"health_success_threshold"`
	HealthFailureThreshold  int     `json:"health_failure_threshold"`
	MaxConnectionAttempts   int     `json:"max_connection_attempts"`
	DPAware                 bool    `json:"dp_aware"`
}

// Env is what a translation reads besides the argv.
type Env struct {
	// Router is api.RouterVLLM or api.RouterSGLang.
	Router string
	// Loopback is the Pod's private address the process binds.
	Loopback string
	// Discover, when set, lists the Pods a selector matches now: the
	// static-workers row runs. Nil: the router discovers workers itself.
	Discover func(namespace string, selector map[string]string) []proc.Pod
	// Vocab is the directory holding o200k_base.tiktoken.
	Vocab string
	// HubEndpoint is where the hub client is sent (HF_ENDPOINT): an
	// address that closes every connection. HubHome is an empty directory
	// for its cache (HF_HOME).
	HubEndpoint, HubHome string
}

// Translate plans the upstream run of a rendered router argv.
func Translate(rendered []string, env Env) (Plan, error) {
	if !Supports(env.Router) {
		return Plan{}, fmt.Errorf("upstream: no upstream code for router %q (only %s)", env.Router, strings.Join(Routers(), ", "))
	}
	t := &translating{env: env, args: parseArgs(rendered), plan: Plan{Env: map[string]string{}}}
	for _, row := range Translations {
		if !slices.Contains(row.Routers, env.Router) || (row.Static && env.Discover == nil) {
			continue
		}
		before, envBefore, regBefore := render(t.args), len(t.plan.Env), len(t.plan.Register)
		if err := row.apply(t); err != nil {
			return Plan{}, fmt.Errorf("upstream: translating %s's argv (%s): %w", env.Router, row.Name, err)
		}
		if row.Name == "launcher" || !slices.Equal(before, render(t.args)) || len(t.plan.Env) != envBefore ||
			len(t.plan.Register) != regBefore {
			t.plan.Rows = append(t.plan.Rows, row.Name)
		}
	}
	t.plan.Args = render(t.args)
	return t.plan, nil
}

// Command is the launcher's command line before its arguments.
func (in *Install) Command(router string) ([]string, error) {
	w, ok := in.Wheel(router)
	if !ok {
		return nil, fmt.Errorf("upstream: %s has no wheel for router %q", in.Dir, router)
	}
	return []string{in.Python, "-m", w.Module + ".launch_router"}, nil
}

// arg is one flag of an argv with its values, in the form it was written.
type arg struct {
	flag string
	vals []string
	// eq: written --flag=value.
	eq bool
}

type translating struct {
	env  Env
	args []arg
	plan Plan
}

// parseArgs splits argv into flags, each with the values that follow it up
// to the next "--" token, as clap's and argparse's list flags read them.
func parseArgs(argv []string) []arg {
	var out []arg
	for _, tok := range argv {
		if strings.HasPrefix(tok, "--") {
			if f, v, ok := strings.Cut(tok, "="); ok {
				out = append(out, arg{flag: f, vals: []string{v}, eq: true})
			} else {
				out = append(out, arg{flag: tok})
			}
			continue
		}
		if len(out) == 0 {
			out = append(out, arg{})
		}
		out[len(out)-1].vals = append(out[len(out)-1].vals, tok)
	}
	return out
}

func render(args []arg) []string {
	var out []string
	for _, a := range args {
		switch {
		case a.flag == "":
			out = append(out, a.vals...)
		case a.eq:
			out = append(out, a.flag+"="+strings.Join(a.vals, " "))
		default:
			out = append(out, a.flag)
			out = append(out, a.vals...)
		}
	}
	return out
}

func (t *translating) find(flag string) int {
	return slices.IndexFunc(t.args, func(a arg) bool { return a.flag == flag })
}

// value is a flag's single value, and whether the flag is there.
func (t *translating) value(flag string) (string, bool) {
	i := t.find(flag)
	if i < 0 {
		return "", false
	}
	return strings.Join(t.args[i].vals, " "), true
}

func (t *translating) remove(flags ...string) {
	t.args = slices.DeleteFunc(t.args, func(a arg) bool { return slices.Contains(flags, a.flag) })
}

func bindLoopback(t *translating) error {
	for _, flag := range []string{"--host", "--prometheus-host"} {
		i := t.find(flag)
		if i < 0 {
			continue
		}
		if v := strings.Join(t.args[i].vals, " "); v != "0.0.0.0" && v != "" && v != "::" {
			return fmt.Errorf("%s=%s: the sim binds the Pod's address only (0.0.0.0 is what the operator renders)", flag, v)
		}
		t.args[i].vals = []string{t.env.Loopback}
	}
	return nil
}

func addIfAbsent(flag, value string) func(*translating) error {
	return func(t *translating) error {
		if t.find(flag) < 0 {
			t.args = append(t.args, arg{flag: flag, vals: []string{value}, eq: true})
		}
		return nil
	}
}

// clapEvictionDefault is sgl-model-gateway's clap default for
// --eviction-interval.
const clapEvictionDefault = "120"

func evictionInterval(t *translating) error {
	if i := t.find("--eviction-interval"); i >= 0 {
		t.args[i].flag = "--eviction-interval-secs"
		return nil
	}
	return addIfAbsent("--eviction-interval-secs", clapEvictionDefault)(t)
}

func igw(t *translating) error {
	if t.find("--service-discovery") >= 0 && t.find("--enable-igw") < 0 {
		t.args = append(t.args, arg{flag: "--enable-igw"})
	}
	return nil
}

func harmonyVocab(t *translating) error {
	if t.env.Vocab == "" {
		return fmt.Errorf("no directory holding o200k_base.tiktoken (run %s)", InstallCommand)
	}
	t.plan.Env["TIKTOKEN_ENCODINGS_BASE"] = t.env.Vocab
	return nil
}

func hubOffline(t *translating) error {
	if t.env.HubEndpoint == "" || t.env.HubHome == "" {
		return errors.New("no hub endpoint or HF_HOME directory to give the process")
	}
	t.plan.Env["HF_ENDPOINT"] = t.env.HubEndpoint
	t.plan.Env["HF_HOME"] = t.env.HubHome
	return nil
}

// intValue is a flag's integer value, or def when it is absent.
func (t *translating) intValue(flag string, def int) (int, error) {
	v, ok := t.value(flag)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: %v", flag, v, err)
	}
	return n, nil
}

// registration is the body sgl-model-gateway's discovery submits for a Pod:
// the router's health settings (clap's defaults where none is given:
// timeout 5, interval 60, success 2, failure 3), 20 connection attempts per
// success needed.
func (t *translating) registration(url string) (Registration, error) {
	r := Registration{URL: url}
	var err error
	for _, f := range []struct {
		flag string
		def  int
		to   *int
	}{
		{"--health-check-timeout-secs", 5, &r.HealthCheckTimeoutSecs},
		{"--health-check-interval-secs", 60, &r.HealthCheckIntervalSecs},
		{"--health-success-threshold", 2, &r.HealthSuccessThreshold},
		{"--health-failure-threshold", 3, &r.HealthFailureThreshold},
	} {
		if *f.to, err = t.intValue(f.flag, f.def); err != nil {
			return Registration{}, err
		}
	}
	r.MaxConnectionAttempts = r.HealthSuccessThreshold * 20
	r.DPAware = t.find("--dp-aware") >= 0
	return r, nil
}

// bootstrapAnnotations are the Pod annotations each router's service
// discovery reads a prefill Pod's bootstrap port from.
var bootstrapAnnotations = map[string]string{
	api.RouterVLLM:   "vllm.ai/bootstrap-port",
	api.RouterSGLang: "sglang.ai/bootstrap-port",
}

func staticWorkers(t *translating) error {
	if t.find("--service-discovery") < 0 {
		return nil
	}
	ns, _ := t.value("--service-discovery-namespace")
	port, ok := t.value("--service-discovery-port")
	if !ok {
		return fmt.Errorf("--service-discovery without --service-discovery-port: the operator always renders it")
	}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("--service-discovery-port=%s: %v", port, err)
	}
	selector := func(flag string) (map[string]string, bool, error) {
		i := t.find(flag)
		if i < 0 {
			return nil, false, nil
		}
		sel := map[string]string{}
		for _, kv := range t.args[i].vals {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, true, fmt.Errorf("%s %q: want key=value", flag, kv)
			}
			sel[k] = v
		}
		return sel, true, nil
	}
	urls := func(sel map[string]string, flag string) ([]string, error) {
		pods := t.env.Discover(ns, sel)
		slices.SortFunc(pods, func(a, b proc.Pod) int { return strings.Compare(a.Name, b.Name) })
		var out []string
		for _, p := range pods {
			if p.Deleting {
				continue
			}
			out = append(out, "http://"+net.JoinHostPort(p.IP, port))
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no Pod in namespace %q matches %s %s: the static worker list would be empty", ns, flag, formatSelector(sel))
		}
		return out, nil
	}
	server, hasServer, err := selector("--selector")
	if err != nil {
		return err
	}
	prefill, hasPrefill, err := selector("--prefill-selector")
	if err != nil {
		return err
	}
	decode, hasDecode, err := selector("--decode-selector")
	if err != nil {
		return err
	}
	// sgl-model-gateway runs IGW (the igw row), which ignores
	// --worker-urls: its workers are registered as its discovery would.
	register := t.env.Router == api.RouterSGLang
	var added []arg
	add := func(flag, kind, url string, bootstrap string) error {
		if !register {
			a := arg{flag: flag, vals: []string{url}}
			if bootstrap != "" {
				a.vals = append(a.vals, bootstrap)
			}
			added = append(added, a)
			return nil
		}
		r, err := t.registration(url)
		if err != nil {
			return err
		}
		if kind != "" {
			r.WorkerType = &kind
		}
		if bootstrap != "" {
			bp, err := strconv.Atoi(bootstrap)
			if err != nil {
				return fmt.Errorf("Pod annotation %s=%q: %v", bootstrapAnnotations[t.env.Router], bootstrap, err)
			}
			r.BootstrapPort = &bp
		}
		t.plan.Register = append(t.plan.Register, r)
		return nil
	}
	switch {
	case hasPrefill && hasDecode:
		pods := t.env.Discover(ns, prefill)
		slices.SortFunc(pods, func(a, b proc.Pod) int { return strings.Compare(a.Name, b.Name) })
		n := 0
		for _, p := range pods {
			if p.Deleting {
				continue
			}
			n++
			if err := add("--prefill", "prefill", "http://"+net.JoinHostPort(p.IP, port), p.Annotations[bootstrapAnnotations[t.env.Router]]); err != nil {
				return err
			}
		}
		if n == 0 {
			return fmt.Errorf("no Pod in namespace %q matches --prefill-selector %s: the static worker list would be empty", ns, formatSelector(prefill))
		}
		ds, err := urls(decode, "--decode-selector")
		if err != nil {
			return err
		}
		for _, u := range ds {
			if err := add("--decode", "decode", u, ""); err != nil {
				return err
			}
		}
	case hasServer:
		ws, err := urls(server, "--selector")
		if err != nil {
			return err
		}
		if register {
			for _, u := range ws {
				if err := add("", "", u, ""); err != nil {
					return err
				}
			}
		} else {
			added = append(added, arg{flag: "--worker-urls", vals: ws})
		}
	default:
		return fmt.Errorf("--service-discovery without a selector: nothing to list")
	}
	// Where --service-discovery stood, so the rest keeps its order.
	i := t.find("--service-discovery")
	t.args = slices.Insert(t.args, i, added...)
	t.remove("--service-discovery", "--service-discovery-namespace", "--service-discovery-port",
		"--selector", "--prefill-selector", "--decode-selector")
	return nil
}

func formatSelector(sel map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		kv = append(kv, k+"="+sel[k])
	}
	return strings.Join(kv, ",")
}
