package upstream

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// EPPTranslation is one named rewrite of what the operator renders for the
// llm-d router Pod's epp container (its argv, the EndpointPickerConfig it
// mounts, its environment), made so llm-d-router's own EPP runs here as it
// does in the operator's Pod. Everything no row rewrites reaches the binary
// as rendered: its flag parsing, its config loader and its plugins answer it.
type EPPTranslation struct {
	// Name is the row's one name (tests and docs refer to it).
	Name string
	// Where is where the row applies: "sim" (the plain sim only) or "all".
	Where string
	// Rendered is what the operator renders; Upstream what runs instead.
	Rendered, Upstream string
	// Why justifies the row; Cite is the sources it rests on (repo@commit:path),
	// the operator's and the EPP's.
	Why, Cite string

	apply func(t *eppTranslating) error
}

// Where values.
const (
	eppEverywhere = "all"
	eppPlainSim   = "sim"
)

// EPPTranslations is the one table from the rendered epp container to what
// the built EPP runs with on the sim, in the order the rows apply.
var EPPTranslations = []EPPTranslation{
	{
		Name: "epp-ports", Where: eppEverywhere,
		Rendered: "--grpc-health-port=9003 (and the defaults --grpc-port=9002, --metrics-port=9090)",
		Upstream: "--grpc-port=<free port> --grpc-health-port=<free port> --metrics-port=<free port>; the sim serves the Pod's 9002, 9003 and 9090 in front of them",
		Why: "the EPP has no bind-address flag: its ext_proc and health gRPC servers and its metrics server listen on \":<port>\", every " +
			"interface of the host, where the sim's Pods share one network namespace (each with its own loopback address) and " +
			"two router Pods, or a router Pod and its replacement, would both take 9002. The process gets free ports instead, and " +
			"once it has bound each, the Pod's own address serves 9002 and 9003 as TCP forwards to them (envoy's ext_proc dials " +
			"the Pod's 9002 as before) and 9090 as an HTTP front through the Pod's injected faults",
		Cite: "llm-d/llm-d-router@71f4f099:internal/runnable/grpc.go (net.Listen(\"tcp\", \":%d\")); " +
			"llm-d/llm-d-router@71f4f099:cmd/epp/runner/runner.go (serveMetrics, Addr \":%d\"); " +
			"llm-d/llm-d-router@71f4f099:pkg/epp/server/options.go (grpc-port 9002, metrics-port 9090 defaults); " +
			"gpustack/gpustack-operator@36d990eb:pkg/worker/controllers/worker/model_deployment_router.go (the epp container's ports)",
		apply: eppPorts,
	},
	{
		Name: "config-mount", Where: eppEverywhere,
		Rendered: "--config-file=/config/epp.yaml (the <md>-router ConfigMap mounted at /config)",
		Upstream: "--config-file=<the ConfigMap's keys written to a directory of the container's>/config/epp.yaml",
		Why: "the EPP reads its EndpointPickerConfig from the file system; the sim's ConfigMap mount is a file system of the " +
			"container's, not the host's, so its keys are written to a directory of their own for the process, unchanged " +
			"except where another row says",
		Cite: "llm-d/llm-d-router@71f4f099:cmd/epp/runner/runner.go (parseConfigurationPhaseOne reads --config-file); " +
			"gpustack/gpustack-operator@36d990eb:pkg/worker/controllers/worker/model_deployment_router.go (the /config mount)",
		apply: eppConfigMount,
	},
	{
		Name: "file-discovery", Where: eppPlainSim,
		Rendered: "--endpoint-selector=<the deployment's selector> --endpoint-target-ports=<port>: the EPP lists and watches the " +
			"namespace's Pods through the Kubernetes API (a controller-runtime manager)",
		Upstream: "the EndpointPickerConfig gains a file-discovery plugin (path: <dir>/endpoints.yaml, watchFile: true) named by " +
			"dataLayer.discovery; the sim writes that file from the kubelet's Pods: each Pod the selector matches that is Ready " +
			"and not deleting, named <pod>-rank-<i> per target port with the Pod's namespace and labels, rewritten (by rename) on every Pod change",
		Why: "the selector path needs a Kubernetes API server (ctrl.GetConfig, a manager, its Pod reconciler), which the plain sim " +
			"has not; the API-server tier gives it one and drops this row. A config with dataLayer.discovery takes the EPP's file " +
			"path instead, which keeps everything else (scheduling, data layer, ext_proc, metrics) and still needs " +
			"--endpoint-selector to pass flag validation (it is then unused). The file holds what the Pod reconciler would admit: " +
			"the same selector, IsPodReady (Ready and no deletionTimestamp), the same endpoint names",
		Cite: "llm-d/llm-d-router@71f4f099:cmd/epp/runner/runner.go (Run: dataLayer.discovery selects runWithFileDiscovery); " +
			"llm-d/llm-d-router@71f4f099:pkg/epp/framework/plugins/datalayer/discovery/file/plugin.go (the file's shape, the rename-safe watch); " +
			"llm-d/llm-d-router@71f4f099:pkg/epp/datastore/datastore.go (podResyncAll, createEndpointNamespacedName); " +
			"llm-d/llm-d-router@71f4f099:pkg/epp/util/pod/pod.go (IsPodReady); llm-d/llm-d-router@71f4f099:pkg/epp/server/options.go (Validate); " +
			"gpustack/gpustack-operator@36d990eb:pkg/worker/controllers/worker/model_deployment_router.go (endpoint-selector, endpoint-target-ports)",
		apply: eppFileDiscovery,
	},
	{
		Name: "cluster-dns", Where: eppEverywhere,
		Rendered: "(nothing: in a cluster the token-producer's vllm.url, the tokenizer role's Service http://<md>-<role>.<ns>.svc:<port>, resolves through cluster DNS)",
		Upstream: "HTTP_PROXY=http://<a proxy on the Pod's loopback that resolves <svc>.<ns>.svc names to a Ready Pod of the Service> in the environment",
		Why: "the host's resolver knows no sim Service; the token producer's render client is a clone of Go's default transport, " +
			"which takes its proxy from the environment and never proxies a loopback address, so the engines' Pod IPs (all " +
			"loopback on the sim; the metrics scrapes) go direct and only Service names reach the proxy, which resolves them " +
			"as kube-proxy would. The URL the EPP calls stays the one the operator rendered",
		Cite: "llm-d/llm-d-router@71f4f099:pkg/epp/framework/plugins/requestcontrol/dataproducer/tokenizer/vllm_http.go (newRenderTransport: " +
			"http.DefaultTransport cloned); golang/go@go1.26.8:src/vendor/golang.org/x/net/http/httpproxy/proxy.go (useProxy: no proxy for loopback IPs); " +
			"gpustack/gpustack-operator@36d990eb:pkg/worker/controllers/worker/model_deployment_router.go (the token-producer's vllm.url)",
		apply: eppClusterDNS,
	},
}

// EPPEnv is what an EPP translation reads besides the rendered container.
type EPPEnv struct {
	// ConfigDir is where the ConfigMap's keys are written for the process.
	ConfigDir string
	// GRPCPort, HealthPort and MetricsPort are the free ports the process binds.
	GRPCPort, HealthPort, MetricsPort int
	// EndpointsFile is the file-discovery file; "" where the EPP discovers
	// through a real Kubernetes API (the API-server tier).
	EndpointsFile string
	// Proxy is the cluster-dns proxy's URL.
	Proxy string
}

// EPPPlan is how one epp container runs upstream.
type EPPPlan struct {
	// Args is the binary's argv; Env is added to its environment.
	Args []string
	Env  map[string]string
	// Config is the EndpointPickerConfig written for it.
	Config []byte
	// Rows are the names of the rows that changed something.
	Rows []string
}

type eppTranslating struct {
	translating
	env    EPPEnv
	config []byte
	plan   EPPPlan
}

// TranslateEPP plans the upstream run of a rendered epp container: its
// argv and the EndpointPickerConfig its --config-file names.
func TranslateEPP(rendered []string, config []byte, env EPPEnv) (EPPPlan, error) {
	t := &eppTranslating{translating: translating{args: parseArgs(rendered)}, env: env, config: config,
		plan: EPPPlan{Env: map[string]string{}}}
	for _, row := range EPPTranslations {
		if row.Where == eppPlainSim && env.EndpointsFile == "" {
			continue
		}
		before, envBefore, configBefore := render(t.args), len(t.plan.Env), string(t.config)
		if err := row.apply(t); err != nil {
			return EPPPlan{}, fmt.Errorf("upstream: translating the epp container (%s): %w", row.Name, err)
		}
		if !slices.Equal(before, render(t.args)) || len(t.plan.Env) != envBefore || configBefore != string(t.config) {
			t.plan.Rows = append(t.plan.Rows, row.Name)
		}
	}
	t.plan.Args, t.plan.Config = render(t.args), t.config
	return t.plan, nil
}

// set gives flag value, in place when it is rendered, else at the end.
func (t *eppTranslating) set(flag, value string) {
	if i := t.find(flag); i >= 0 {
		t.args[i].vals, t.args[i].eq = []string{value}, true
		return
	}
	t.args = append(t.args, arg{flag: flag, vals: []string{value}, eq: true})
}

func eppPorts(t *eppTranslating) error {
	if t.env.GRPCPort == 0 || t.env.HealthPort == 0 || t.env.MetricsPort == 0 {
		return errors.New("no free ports to give the process")
	}
	t.set("--grpc-port", strconv.Itoa(t.env.GRPCPort))
	t.set("--grpc-health-port", strconv.Itoa(t.env.HealthPort))
	t.set("--metrics-port", strconv.Itoa(t.env.MetricsPort))
	return nil
}

// RenderedConfigPath is the --config-file the operator renders.
func RenderedConfigPath(rendered []string) (string, bool) {
	t := &translating{args: parseArgs(rendered)}
	return t.value("--config-file")
}

func eppConfigMount(t *eppTranslating) error {
	path, ok := t.value("--config-file")
	if !ok {
		return nil
	}
	if !strings.HasPrefix(path, "/") || t.env.ConfigDir == "" {
		return fmt.Errorf("--config-file=%s: the sim writes the mounted ConfigMap of an absolute path only", path)
	}
	t.set("--config-file", strings.TrimSuffix(t.env.ConfigDir, "/")+path)
	return nil
}

// FileDiscoveryPlugin is the name the file-discovery row gives its plugin.
const FileDiscoveryPlugin = "sim-pods-file-discovery"

func eppFileDiscovery(t *eppTranslating) error {
	if _, ok := t.value("--endpoint-selector"); !ok {
		return errors.New("no --endpoint-selector rendered: the file lists what the selector matches")
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(t.config, &cfg); err != nil {
		return fmt.Errorf("the rendered EndpointPickerConfig: %w", err)
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	plugins, _ := cfg["plugins"].([]any)
	cfg["plugins"] = append(plugins, map[string]any{"type": "file-discovery", "name": FileDiscoveryPlugin,
		"parameters": map[string]any{"path": t.env.EndpointsFile, "watchFile": true}})
	dl, _ := cfg["dataLayer"].(map[string]any)
	if dl == nil {
		dl = map[string]any{}
	}
	if _, ok := dl["discovery"]; ok {
		return errors.New("the rendered EndpointPickerConfig names a discovery plugin already")
	}
	dl["discovery"] = map[string]any{"pluginRef": FileDiscoveryPlugin}
	cfg["dataLayer"] = dl
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	t.config = out
	return nil
}

func eppClusterDNS(t *eppTranslating) error {
	if t.env.Proxy == "" {
		return errors.New("no cluster-dns proxy to give the process")
	}
	t.plan.Env["HTTP_PROXY"] = t.env.Proxy
	return nil
}

// EPPTranslationsMarkdown is the EPP's translation table as
// docs/upstream-llmd.md shows it, generated from EPPTranslations.
func EPPTranslationsMarkdown() string {
	var b strings.Builder
	b.WriteString("| row | where | the operator renders | the EPP on the sim gets | why | source |\n|---|---|---|---|---|---|\n")
	for _, t := range EPPTranslations {
		where := "plain sim and API-server tier"
		if t.Where == eppPlainSim {
			where = "plain sim only"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", t.Name, where,
			MarkdownCell(t.Rendered), MarkdownCell(t.Upstream), MarkdownCell(t.Why), MarkdownCell(t.Cite))
	}
	return b.String()
}
