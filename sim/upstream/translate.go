package upstream

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/api"
)

// Translation is one named rewrite of the argv the operator renders for a
// router container, made so the router's binary runs here as it does in
// the operator's Pod. Everything no row rewrites reaches the binary as
// rendered, so its own front end (clap: its errors, its choices, its
// defaults) answers it.
type Translation struct {
	// Name is the row's one name (tests and docs refer to it).
	Name string
	// Routers are the routers the row applies to.
	Routers []string
	// Rendered is what the operator renders; Upstream what runs instead.
	Rendered, Upstream string
	// Why justifies the row; Cite is the upstream source it rests on
	// (repo@tag:path).
	Why, Cite string

	apply func(t *translating) error
}

// Translations is the one table from the rendered argv to the argv the
// binary runs with on the sim, in the order the rows apply.
var Translations = []Translation{
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
			"(clap's default); a sim engine a few milliseconds late would hold the router 30 s. It changes when, not what",
		Cite:  "vllm-project/router@v0.1.15:src/routers/http/router.rs (wait_for_healthy_workers), src/main.rs (default 30)",
		apply: addIfAbsent("--worker-startup-check-interval", "1"),
	},
	{
		Name: "harmony-vocab", Routers: []string{api.RouterSGLang},
		Rendered: "(nothing)",
		Upstream: "TIKTOKEN_ENCODINGS_BASE=<the routers cache>/tiktoken in the environment",
		Why: "in IGW mode the gateway builds its gRPC routers at startup, which load the o200k_base vocab through openai-harmony " +
			"from openaipublic.blob.core.windows.net and panic without it; no such host is reachable here, so the same file " +
			"(sha256-checked by harmony and by make routers, taken from the tiktoken-rs crate) is named by the variable " +
			"harmony reads first. A cluster without that host needs the same (docs/routers-from-source.md)",
		Cite:  "sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/routers/grpc/harmony/builder.rs; openai/harmony@v0.0.5:src/tiktoken_ext/public_encodings.rs",
		apply: harmonyVocab,
	},
	{
		Name: "hub-offline", Routers: []string{api.RouterVLLM, api.RouterSGLang},
		Rendered: "(nothing)",
		Upstream: "HF_ENDPOINT=http://<Pod loopback>:<port that closes every connection> HF_HOME=.routers/hf-home in the environment",
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
		Name: "kube-api", Routers: []string{api.RouterVLLM, api.RouterSGLang},
		Rendered: "(nothing: in a cluster the router's Kubernetes client finds the API server from its Pod's service account)",
		Upstream: "KUBECONFIG=<a kubeconfig naming the Pods API the sim serves on the Pod's loopback> in the environment",
		Why: "--service-discovery runs the router's own discovery (kube-rs: list the Pods, then watch them from that " +
			"resourceVersion), which needs a Kubernetes API; the plain sim serves the read side of one over the kubelet's " +
			"Pods (list and watch of core/v1 Pods with phase, podIP, the Ready condition, labels, annotations and " +
			"deletionTimestamp), so which Pods become workers, and when, is the routers' own code. The API-server tier gives " +
			"a real kube-apiserver's kubeconfig instead, through the same variable",
		Cite: "vllm-project/router@v0.1.15:src/service_discovery.rs (Client::try_default, watcher(...).applied_objects()); " +
			"sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/service_discovery.rs; kube-rs/kube@1.1.0:kube-runtime/src/watcher.rs",
		apply: kubeAPI,
	},
}

// Plan is how one router container runs upstream.
type Plan struct {
	// Args is the binary's argv.
	Args []string
	// Env is added to the process's environment.
	Env map[string]string
	// Rows are the names of the Translations that changed something.
	Rows []string
}

// Env is what a translation reads besides the argv.
type Env struct {
	// Router is api.RouterVLLM or api.RouterSGLang.
	Router string
	// Loopback is the Pod's private address the process binds.
	Loopback string
	// Kubeconfig names the Kubernetes API the router's discovery uses:
	// the sim's Pods API, or a real one (the API-server tier).
	Kubeconfig string
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
		return Plan{}, fmt.Errorf("routers: make routers builds no binary for router %q (only %s)", env.Router, strings.Join(Routers(), ", "))
	}
	t := &translating{env: env, args: parseArgs(rendered), plan: Plan{Env: map[string]string{}}}
	for _, row := range Translations {
		if !slices.Contains(row.Routers, env.Router) {
			continue
		}
		before, envBefore := render(t.args), len(t.plan.Env)
		if err := row.apply(t); err != nil {
			return Plan{}, fmt.Errorf("upstream: translating %s's argv (%s): %w", env.Router, row.Name, err)
		}
		if !slices.Equal(before, render(t.args)) || len(t.plan.Env) != envBefore {
			t.plan.Rows = append(t.plan.Rows, row.Name)
		}
	}
	t.plan.Args = render(t.args)
	return t.plan, nil
}

// Command is the binary's command line before its arguments.
func (in *Install) Command(router string) ([]string, error) {
	b, ok := in.Binary(router)
	if !ok {
		return nil, fmt.Errorf("routers: %s has no binary for router %q", in.Dir, router)
	}
	return []string{b.Path}, nil
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

func kubeAPI(t *translating) error {
	if t.env.Kubeconfig == "" {
		return errors.New("no kubeconfig to give the process (the sim's Pods API, or a real one)")
	}
	t.plan.Env["KUBECONFIG"] = t.env.Kubeconfig
	return nil
}
