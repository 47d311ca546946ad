package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/gpustack/routing-conformance/api"
)

// Router binaries inside the router image (argv.go argvRouters).
const (
	BinaryVLLMRouter    = "vllm-router"
	BinarySGLangGateway = "sgl-model-gateway"
	BinaryEPP           = "epp"
)

// Engine programs (ModelDeploymentEngineCommand).
var (
	EngineProgramVLLM   = []string{"vllm"}
	EngineProgramSGLang = []string{"python3", "-m", "sglang.launch_server"}
)

// Labels the operator writes that api does not name.
const (
	LabelQueueName         = "kueue.x-k8s.io/queue-name"
	LabelPodGroupName      = "kueue.x-k8s.io/pod-group-name"
	LabelPodTemplateHash   = "pod-template-hash"
	AnnotationGroupTotal   = "kueue.x-k8s.io/pod-group-total-count"
	AnnotationRoleHash     = "kueue.x-k8s.io/role-hash"
	AnnotationGroupServing = "kueue.x-k8s.io/pod-group-serving"
	AnnotationPodSpecHash  = "modeldeployment.gpustack.ai/pod-spec-hash"
	AnnotationRouterConfig = "modeldeployment.gpustack.ai/router-config-hash"
)

// UpstreamKind is the role kind as labels and routers spell it:
// server, prefill or decode.
func UpstreamKind(kind string) string {
	if kind == "" {
		kind = api.RoleKindServer
	}
	return strings.ToLower(kind)
}

// RouterServiceName is the name every router object carries: <md>-router.
func RouterServiceName(md *api.ModelDeployment) string { return md.Metadata.Name + "-router" }

// RouterEndpoint is status.endpoint once the router is ready
// (modelDeploymentRouterEndpoint over the rendered Service).
func RouterEndpoint(md *api.ModelDeployment) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", RouterServiceName(md), md.Metadata.Namespace, api.RouterHTTPPort)
}

// DeploymentEndpoint is status.endpoint without a router: the deployment-wide
// Service fronting the first role.
func DeploymentEndpoint(md *api.ModelDeployment) string {
	port := api.EngineDefaultPort
	scheme := "http"
	if len(md.Spec.Roles) > 0 {
		port = int(ServingPort(&md.Spec.Roles[0]))
		scheme = ServingScheme(&md.Spec.Roles[0])
	}
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, md.Metadata.Name, md.Metadata.Namespace, port)
}

// RoleEndpoint is the per-role Service address, <md>-<role>.
func RoleEndpoint(md *api.ModelDeployment, role *api.Role) string {
	return fmt.Sprintf("%s://%s-%s.%s.svc:%d", ServingScheme(role), md.Metadata.Name, role.Name,
		md.Metadata.Namespace, ServingPort(role))
}

// EndpointLabels is the deployment-wide discovery selector: the Pods of this
// deployment that answer the API, leaders only (router.Input.EndpointLabels).
func EndpointLabels(md *api.ModelDeployment) map[string]string {
	return map[string]string{
		api.LabelName:     api.NameValue,
		api.LabelInstance: md.Metadata.Name,
		api.LabelMember:   "0",
	}
}

// RoleSelector is one role's published selector (status.router.roles[].selector):
// the role's Service selector plus its kind and the leader member index.
func RoleSelector(md *api.ModelDeployment, role *api.Role) map[string]string {
	return map[string]string{
		api.LabelName:      api.NameValue,
		api.LabelInstance:  md.Metadata.Name,
		api.LabelComponent: role.Name,
		api.LabelRoleKind:  UpstreamKind(role.RoleKind()),
		api.LabelMember:    "0",
	}
}

// RouterLabels are on every router object and the router Pod template.
func RouterLabels(md *api.ModelDeployment) map[string]string {
	return map[string]string{
		api.LabelName:     api.NameValue,
		api.LabelInstance: md.Metadata.Name,
		api.LabelRouter:   md.Spec.Router.Name,
	}
}

// MetricsAnnotations are the Prometheus scrape annotations on a rendered Pod.
func MetricsAnnotations(port int32, scheme string) map[string]string {
	return map[string]string{
		api.AnnotationPromScrape: "true",
		api.AnnotationPromPath:   "/metrics",
		api.AnnotationPromPort:   strconv.Itoa(int(port)),
		api.AnnotationPromScheme: scheme,
	}
}

// RouterContract is status.router as the operator publishes it.
func RouterContract(md *api.ModelDeployment) *api.RouterStatus {
	if md.Spec.Router == nil {
		return nil
	}
	rs := &api.RouterStatus{Name: md.Spec.Router.Name, Endpoint: RouterEndpoint(md)}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		rs.Roles = append(rs.Roles, api.RouterRoleStatus{
			Name:     role.Name,
			Kind:     role.RoleKind(),
			Selector: RoleSelector(md, role),
			Endpoint: RoleEndpoint(md, role),
		})
	}
	return rs
}

// RouterWorkload is the router Pod template the operator renders.
type RouterWorkload struct {
	// Name is the Deployment (and Service) name, <md>-router.
	Name string
	// Container is "router" for the argv routers, "epp" for llm-d-router.
	Container string
	// Command is the program: vllm-router, sgl-model-gateway or epp.
	Command []string
	// Args is the rendered argv followed by spec.router.extraArgs.
	Args        []string
	Image       string
	Labels      map[string]string
	Annotations map[string]string
	// Containers are the Pod's containers in start order: the one router
	// container, or llm-d's envoy then epp.
	Containers []ContainerTemplate
	// Config is the llm-d ConfigMap <md>-router's data (nil for the argv
	// routers, which render none).
	Config map[string]string
	// EndpointSelector is the llm-d string form of the discovery selector.
	EndpointSelector string
	// TemplateHash is the ReplicaSet pod-template-hash of this template: it
	// changes exactly when the Deployment would roll.
	TemplateHash string
}

// DefaultRouterImage is the setting model-deployment-router-image's default.
const DefaultRouterImage = "gpustack/llm-router:v0.1.0"

// RenderRouterArgs is the router container's argv: what the operator renders,
// then spec.router.extraArgs (docs/operator.md#router-argv).
func RenderRouterArgs(md *api.ModelDeployment) ([]string, error) {
	w, err := RenderRouter(md)
	if err != nil {
		return nil, err
	}
	return w.Args, nil
}

// RenderRouter renders the router Pod template for md, which must carry a
// namespace and spec.router.
func RenderRouter(md *api.ModelDeployment) (RouterWorkload, error) {
	r := md.Spec.Router
	if r == nil {
		return RouterWorkload{}, fmt.Errorf("render router: spec.router is not set")
	}
	if md.Metadata.Namespace == "" {
		return RouterWorkload{}, fmt.Errorf("render %s: no discovery namespace", r.Name)
	}
	ports := map[int32]bool{}
	for i := range md.Spec.Roles {
		ports[ServingPort(&md.Spec.Roles[i])] = true
	}
	if len(ports) != 1 {
		return RouterWorkload{}, fmt.Errorf("router requires every role to use the same serving port; got %v",
			slices.Sorted(maps.Keys(ports)))
	}
	port := slices.Collect(maps.Keys(ports))[0]

	w := RouterWorkload{
		Name:        RouterServiceName(md),
		Image:       r.Image,
		Labels:      RouterLabels(md),
		Annotations: MetricsAnnotations(api.RouterMetricsPort, "http"),
	}
	if w.Image == "" {
		w.Image = DefaultRouterImage
	}
	switch r.Name {
	case api.RouterVLLM, api.RouterSGLang:
		w.Container = api.ContainerRouter
		args, err := renderArgvRouter(md, port)
		if err != nil {
			return RouterWorkload{}, err
		}
		w.Args = append(args, r.ExtraArgs...)
		if r.Name == api.RouterVLLM {
			w.Command = []string{BinaryVLLMRouter}
		} else {
			w.Command = []string{BinarySGLangGateway}
		}
		w.Containers = []ContainerTemplate{{
			Name: w.Container, Image: w.Image, Command: w.Command, Program: w.Command, Args: w.Args,
			Ports:        []ContainerPort{{Name: "http", Port: api.RouterHTTPPort}, {Name: "metrics", Port: api.RouterMetricsPort}},
			ReadinessTCP: api.RouterHTTPPort, WatchPods: true,
		}}
	case api.RouterLLMD:
		w.Container = api.ContainerEPP
		w.Command = []string{BinaryEPP}
		w.EndpointSelector = llmdEndpointSelector(md)
		w.Args = append([]string{
			"--endpoint-selector=$(ENDPOINT_SELECTOR)",
			"--endpoint-target-ports=$(ENDPOINT_TARGET_PORTS)",
			"--config-file=/config/epp.yaml",
			"--secure-serving=false",
			"--grpc-health-port=9003",
			"--metrics-endpoint-auth=false",
		}, r.ExtraArgs...)
		cfg, err := RenderEPPConfig(md)
		if err != nil {
			return RouterWorkload{}, err
		}
		extra, _ := json.Marshal(r.ExtraArgs)
		w.Config = map[string]string{
			ConfigKeyEPP:         cfg,
			ConfigKeyEnvoy:       RenderEnvoyConfig(r.RequestTimeoutSeconds),
			ConfigKeySelector:    w.EndpointSelector,
			ConfigKeyTargetPorts: strconv.Itoa(int(port)),
			ConfigKeyExtraArgs:   string(extra),
		}
		w.Annotations[AnnotationRouterConfig] = hashRouterConfig(w.Config)
		w.Containers = llmdContainers(w.Image, w.Args)
	default:
		return RouterWorkload{}, fmt.Errorf("unsupported router %q", r.Name)
	}
	w.TemplateHash = podTemplateHash(w)
	w.Labels[LabelPodTemplateHash] = w.TemplateHash
	return w, nil
}

// renderArgvRouter is argv.go renderArgvRouter: bind addresses, ports,
// optional timeout, the vllm-router connector, discovery, then selectors last
// (a list flag swallows whatever follows it).
func renderArgvRouter(md *api.ModelDeployment, port int32) ([]string, error) {
	r := md.Spec.Router
	args := []string{
		"--host=0.0.0.0",
		"--port=" + strconv.Itoa(api.RouterHTTPPort),
		"--prometheus-host=0.0.0.0",
		"--prometheus-port=" + strconv.Itoa(api.RouterMetricsPort),
	}
	if r.RequestTimeoutSeconds != nil {
		args = append(args, "--request-timeout-secs="+strconv.Itoa(int(*r.RequestTimeoutSeconds)))
	}
	if r.Name == api.RouterVLLM {
		// Rendered whether or not the deployment is split: upstream defaults
		// to NIXL, which routes correctly and never transfers.
		args = append(args, "--kv-connector=mooncake")
	}
	args = append(args,
		"--service-discovery",
		"--service-discovery-namespace="+md.Metadata.Namespace,
		"--service-discovery-port="+strconv.Itoa(int(port)),
	)
	var prefill, decode map[string]string
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		switch role.RoleKind() {
		case api.RoleKindPrefill:
			if prefill == nil {
				prefill = RoleSelector(md, role)
			}
		case api.RoleKindDecode:
			if decode == nil {
				decode = RoleSelector(md, role)
			}
		}
	}
	if prefill != nil && decode != nil {
		if r.Name == api.RouterVLLM {
			args = append(args, "--vllm-pd-disaggregation")
		} else {
			args = append(args, "--pd-disaggregation")
		}
		args = append(args, selectorArgs("--prefill-selector", prefill)...)
		return append(args, selectorArgs("--decode-selector", decode)...), nil
	}
	return append(args, selectorArgs("--selector", EndpointLabels(md))...), nil
}

// selectorArgs renders one label per argument, sorted by key.
func selectorArgs(flag string, labels map[string]string) []string {
	out := []string{flag}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, k+"="+labels[k])
	}
	return out
}

func llmdEndpointSelector(md *api.ModelDeployment) string {
	l := EndpointLabels(md)
	return strings.Join([]string{
		api.LabelName + "=" + l[api.LabelName],
		api.LabelInstance + "=" + l[api.LabelInstance],
		api.LabelMember + "=" + l[api.LabelMember],
		"!" + api.LabelRouter,
	}, ",")
}

// EngineWorkload is one engine replica's Pod as the operator renders it.
type EngineWorkload struct {
	// GenerateName is <md>-<role>- (the API server appends 5 characters).
	GenerateName string
	Container    string
	Image        string
	// Command is the whole argv, program first.
	Command []string
	// Program is the part of Command naming the program (vllm, or python3 -m
	// sglang.launch_server); Args is the rest, what the program parses.
	Program []string
	Args    []string
	// Unmanaged is true for a take-over role (spec.roles[].command set).
	Unmanaged bool
	Env       []api.EnvVar
	// Port is where the engine listens: the serving port, or the model
	// server port behind a direct decoder's routing proxy.
	Port int32
	// ExtraPorts are the listeners the operator synthesizes beside the
	// serving port (the KV-event publisher's 5557 and 5558).
	ExtraPorts []int32
	// ProbePort and ProbePath are what the engine's probes GET: /health on
	// Port, or /v1/models on the proxy's serving port.
	ProbePort int32
	ProbePath string
	// Sidecar is a direct decoder's routing proxy under llm-d-router, run
	// before the engine (nil for every other Pod).
	Sidecar     *ContainerTemplate
	Scheme      string
	Labels      map[string]string
	Annotations map[string]string
	// PodSpecHash fingerprints the replica; a change rolls it.
	PodSpecHash string
}

// RenderEngineArgs is the engine container's whole argv for one role
// (docs/operator.md#engine-pods): `vllm serve <model> [connector] [extraArgs]
// --host 0.0.0.0 --port <port>` or `python3 -m sglang.launch_server
// --model-path <model> --enable-metrics [connector] [extraArgs] --host ...`,
// the bind flags filled only when the role did not pass them.
func RenderEngineArgs(md *api.ModelDeployment, role *api.Role) ([]string, error) {
	w, err := RenderEngine(md, role, 0)
	if err != nil {
		return nil, err
	}
	return w.Command, nil
}

// RenderEngine renders replica ordinal of role (leader member, size 1 shape).
func RenderEngine(md *api.ModelDeployment, role *api.Role, ordinal int) (EngineWorkload, error) {
	if md.Spec.Model.Name == "" {
		return EngineWorkload{}, fmt.Errorf("role %q: model name is empty", role.Name)
	}
	w := EngineWorkload{
		GenerateName: md.Metadata.Name + "-" + role.Name + "-",
		Container:    api.ContainerEngine,
		Image:        role.Image,
		Port:         ServingPort(role),
		Scheme:       ServingScheme(role),
		Env:          slices.Clone(role.Env),
	}
	if w.Image == "" {
		w.Image = SynthesizedImage(md.Spec.Engine.Name, md.Spec.Engine.Version)
	}
	if len(role.Command) > 0 {
		w.Unmanaged = true
		w.Command = slices.Clone(role.Command)
		w.Program, w.Args = splitProgram(w.Command)
	} else {
		var program []string
		switch md.Spec.Engine.Name {
		case api.EngineVLLM:
			program = EngineProgramVLLM
			w.Args = []string{"serve", md.Spec.Model.Name}
		case api.EngineSGLang:
			program = EngineProgramSGLang
			w.Args = []string{"--model-path", md.Spec.Model.Name, "--enable-metrics"}
		default:
			return EngineWorkload{}, fmt.Errorf("unsupported engine %q", md.Spec.Engine.Name)
		}
		conn, env := connectorArgs(md, role)
		w.Args = append(w.Args, conn...)
		if publishesKVEvents(md, role) {
			w.Args = append(w.Args, kvEventsArgs()...)
			w.ExtraPorts = []int32{VLLMKVEventsPort, VLLMKVEventsReplayPort}
		}
		w.Args = append(w.Args, role.ExtraArgs...)
		direct := frontsDecodeWithSidecar(md, role)
		if direct {
			w.Port = modelServerPort(role)
		}
		w.Args = fillBindArgs(w.Args, w.Port)
		if direct {
			port, err := directDecoderPort(role, w.Args)
			if err != nil {
				return EngineWorkload{}, err
			}
			w.Port = port
			proxy := routingProxy(md, role, port)
			w.Sidecar = &proxy
		}
		w.Env = appendEnvIfAbsent(w.Env, env)
		w.Program = slices.Clone(program)
		w.Command = append(slices.Clone(program), w.Args...)
	}

	w.Labels = map[string]string{
		api.LabelName:      api.NameValue,
		api.LabelInstance:  md.Metadata.Name,
		api.LabelComponent: role.Name,
		api.LabelRoleKind:  UpstreamKind(role.RoleKind()),
		api.LabelPartOf:    api.PartOfValue,
		// The sim has no InstanceType status; the entrance is the type's name.
		LabelQueueName:    role.InstanceType,
		api.LabelOrdinal:  strconv.Itoa(ordinal),
		api.LabelMember:   "0",
		LabelPodGroupName: podGroupName(md, role, ordinal),
	}
	// The scrape annotations name the engine, also behind the proxy.
	w.Annotations = MetricsAnnotations(w.Port, w.Scheme)
	w.ProbePort, w.ProbePath = w.Port, EngineProbePath
	if w.Sidecar != nil {
		w.ProbePort, w.ProbePath = ServingPort(role), DirectDecodeProbePath
	}
	w.Annotations[AnnotationGroupTotal] = strconv.Itoa(int(roleSize(role)))
	w.Annotations[AnnotationRoleHash] = role.Name
	w.Annotations[AnnotationGroupServing] = "true"
	maps.Copy(w.Annotations, bootstrapAnnotations(md, role))
	w.PodSpecHash = hashJSON(struct {
		Image, Container string
		Command          []string
		Env              []api.EnvVar
		Labels           map[string]string
		Annotations      map[string]string
		Sidecar          *ContainerTemplate `json:",omitempty"`
	}{w.Image, w.Container, w.Command, w.Env, w.Labels, w.Annotations, w.Sidecar})
	w.Annotations[AnnotationPodSpecHash] = w.PodSpecHash
	return w, nil
}

// SynthesizedImage is the runner image a role without image: gets. The sim
// cannot read the pool's CUDA version, so the backend part is fixed.
func SynthesizedImage(engine, version string) string {
	return fmt.Sprintf("gpustack/runner:cuda12.9-%s%s", strings.ToLower(engine), version)
}

// splitProgram separates the program from its argv for a take-over command:
// "python3 -m <module>" is one program.
func splitProgram(cmd []string) (program, args []string) {
	if len(cmd) >= 3 && strings.HasPrefix(cmd[0], "python") && cmd[1] == "-m" {
		return slices.Clone(cmd[:3]), slices.Clone(cmd[3:])
	}
	if len(cmd) == 0 {
		return nil, nil
	}
	return slices.Clone(cmd[:1]), slices.Clone(cmd[1:])
}

// fillBindArgs appends --host 0.0.0.0 and --port <port> when the argv does
// not carry them already (appendModelDeploymentBindArgs: filled, not owned).
func fillBindArgs(args []string, port int32) []string {
	has := func(name string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return ArgName(a) == name })
	}
	if !has("--host") {
		args = append(args, "--host", "0.0.0.0")
	}
	if !has("--port") {
		args = append(args, "--port", strconv.Itoa(int(port)))
	}
	return args
}

// connectorArgs renders the prefill/decode transfer leg (docs/operator.md#engine-pods, "P/D
// engine extras"). The exact JSON the operator writes into vLLM's
// --kv-transfer-config was not read; the connector and roles follow the
// reference (MooncakeConnector, producer on prefill, consumer on decode).
func connectorArgs(md *api.ModelDeployment, role *api.Role) (args []string, env []api.EnvVar) {
	if !isPD(md) || (role.RoleKind() != api.RoleKindPrefill && role.RoleKind() != api.RoleKindDecode) {
		return nil, nil
	}
	tcp := md.Spec.KVTransfer == nil || md.Spec.KVTransfer.Protocol == "" ||
		md.Spec.KVTransfer.Protocol == "Auto" || md.Spec.KVTransfer.Protocol == "TCP"
	switch md.Spec.Engine.Name {
	case api.EngineVLLM:
		kvRole := "kv_producer"
		if role.RoleKind() == api.RoleKindDecode {
			kvRole = "kv_consumer"
		}
		cfg, _ := json.Marshal(map[string]string{"kv_connector": "MooncakeConnector", "kv_role": kvRole})
		args = []string{"--kv-transfer-config", string(cfg)}
		if tcp {
			env = append(env, api.EnvVar{Name: "MC_FORCE_TCP", Value: "1"})
		}
	case api.EngineSGLang:
		backend := "mooncake"
		if tcp {
			backend = "mooncake_tcp"
		}
		args = []string{"--disaggregation-mode", UpstreamKind(role.RoleKind()),
			"--disaggregation-transfer-backend", backend}
	}
	return args, env
}

// Bootstrap-port annotations the argv routers' Kubernetes discovery reads
// from a prefill Pod (docs/routers.md#vllm-router-flags, #sgl-model-gateway-flags).
const (
	AnnotationVLLMBootstrapPort   = "vllm.ai/bootstrap-port"
	AnnotationSGLangBootstrapPort = "sglang.ai/bootstrap-port"
)

// bootstrapAnnotations is the prefill Pod's bootstrap-port annotation for
// the argv router of a declared pair: the port its Mooncake bootstrap
// server (vLLM) or bootstrap registry (SGLang) listens on, so the router
// can hand it to the decode leg (docs/operator.md#engine-pods). llm-d-router
// reads none: its decode sidecar has the port from its own flags.
func bootstrapAnnotations(md *api.ModelDeployment, role *api.Role) map[string]string {
	if md.Spec.Router == nil || role.RoleKind() != api.RoleKindPrefill || !isPD(md) {
		return nil
	}
	switch md.Spec.Router.Name {
	case api.RouterVLLM:
		return map[string]string{AnnotationVLLMBootstrapPort: strconv.Itoa(int(VLLMMooncakeBootstrapPort))}
	case api.RouterSGLang:
		return map[string]string{AnnotationSGLangBootstrapPort: strconv.Itoa(int(SGLangBootstrapPort))}
	}
	return nil
}

// isPD reports whether md declares both a Prefill and a Decode role.
func isPD(md *api.ModelDeployment) bool {
	var p, d bool
	for i := range md.Spec.Roles {
		switch md.Spec.Roles[i].RoleKind() {
		case api.RoleKindPrefill:
			p = true
		case api.RoleKindDecode:
			d = true
		}
	}
	return p && d
}

func appendEnvIfAbsent(env, add []api.EnvVar) []api.EnvVar {
	for _, e := range add {
		if !slices.ContainsFunc(env, func(x api.EnvVar) bool { return x.Name == e.Name }) {
			env = append(env, e)
		}
	}
	return env
}

func podGroupName(md *api.ModelDeployment, role *api.Role, ordinal int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%s/%d", md.Metadata.Namespace, md.Metadata.Name, role.Name, ordinal)
	return fmt.Sprintf("gpustack-fnv64-%x", h.Sum64())
}

// podTemplateHash is how a ReplicaSet names itself: fnv32a of the template,
// printed in decimal and mapped onto the API server's safe alphabet.
func podTemplateHash(w RouterWorkload) string {
	h := fnv.New32a()
	b, _ := json.Marshal(struct {
		Container, Image string
		Command, Args    []string
		Annotations      map[string]string
		Containers       []ContainerTemplate
	}{w.Container, w.Image, w.Command, w.Args, w.Annotations, w.Containers})
	h.Write(b)
	return utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

func hashJSON(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// hashRouterConfig is the config-hash annotation: sha256 of the ConfigMap
// data as JSON (hashRouterConfig in model_deployment_router.go @36d990eb).
func hashRouterConfig(data map[string]string) string {
	b, _ := json.Marshal(data)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RouterContainer names the container that runs md's router program:
// "epp" for llm-d-router, "router" for the argv routers.
func RouterContainer(md *api.ModelDeployment) string {
	if md.Spec.Router != nil && md.Spec.Router.Name == api.RouterLLMD {
		return api.ContainerEPP
	}
	return api.ContainerRouter
}
