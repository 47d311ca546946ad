package operator

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/gpustack/routing-conformance/api"
)

// The routing proxy (llm-d's pd-sidecar) the operator puts in front of a
// direct decoder under llm-d-router (docs/operator.md#engine-pods;
// renderModelDeploymentRoutingSidecar and modelDeploymentFrontsDecodeWithSidecar in
// gpustack/gpustack-operator@049325a5:pkg/worker/controllers/worker/model_deployment_render.go
// and model_deployment_connector.go).
const (
	ContainerRoutingProxy = "routing-proxy"
	// DefaultRoutingSidecarImage is the setting
	// model-deployment-routing-sidecar-image's default.
	DefaultRoutingSidecarImage = "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0"
	// ModelServerPort is where the decoder's engine listens behind the
	// proxy (modelDeploymentInternalPort), moved up past declared ports.
	ModelServerPort int32 = 8200
	// DirectDecodeProbePath is what the engine's probes read through the
	// proxy: the proxy answers /health itself, /v1/models reaches the engine
	// (modelDeploymentDirectDecodeProbePath).
	DirectDecodeProbePath = "/v1/models"
	// EngineProbePath is every other managed engine's probe path.
	EngineProbePath = "/health"
)

// ProgramRoutingProxy is the sidecar image's entrypoint (the container
// renders no command): llm-d/llm-d-router@v0.10.0:Dockerfile.sidecar.
var ProgramRoutingProxy = []string{"/app/pd-sidecar"}

// frontsDecodeWithSidecar is modelDeploymentFrontsDecodeWithSidecar plus
// the render's take-over check: a managed Decode role under llm-d-router
// (the sim is never on Ascend). Only llm-d's EPP writes the
// x-prefiller-host-port header the proxy acts on.
func frontsDecodeWithSidecar(md *api.ModelDeployment, role *api.Role) bool {
	return md.Spec.Router != nil && md.Spec.Router.Name == api.RouterLLMD &&
		role.RoleKind() == api.RoleKindDecode && len(role.Command) == 0
}

// modelServerPort is ModelServerPort moved past the role's declared ports.
func modelServerPort(role *api.Role) int32 {
	port := ModelServerPort
	for slices.ContainsFunc(role.Ports, func(p api.Port) bool { return p.Port == port }) {
		port++
	}
	return port
}

// directDecoderPort is the port the engine of a direct decoder listens on
// once the bind flags are filled: the last --port of its argv (a role may
// pass its own). It must not be one the role declares: the proxy owns the
// first, and the others belong to listeners of their own.
func directDecoderPort(role *api.Role, args []string) (int32, error) {
	port, ok := explicitPort(args)
	if !ok {
		return 0, fmt.Errorf("role %q cannot place its routing proxy: --port is missing or invalid", role.Name)
	}
	for _, p := range role.Ports {
		if p.Port == port {
			return 0, fmt.Errorf("role %q places its model server on port %d, which the role already declares", role.Name, port)
		}
	}
	return port, nil
}

// routingProxy is the proxy container: it owns the serving port and
// forwards to the engine on enginePort; the connector follows the engine
// (mooncake with the bootstrap port as a flag on vLLM, sglang with
// SGLANG_BOOTSTRAP_PORT on SGLang), and POD_IP comes from the downward API.
func routingProxy(md *api.ModelDeployment, role *api.Role, enginePort int32) ContainerTemplate {
	serving := int(ServingPort(role))
	args := []string{"--port=" + strconv.Itoa(serving), "--model-server-port=" + strconv.Itoa(int(enginePort))}
	env := []EnvVarSource{{Name: "POD_IP", FieldPath: "status.podIP"}}
	if md.Spec.Engine.Name == api.EngineSGLang {
		args = append(args, "--kv-connector=sglang")
		env = append(env, EnvVarSource{Name: "SGLANG_BOOTSTRAP_PORT", Value: strconv.Itoa(int(SGLangBootstrapPort))})
	} else {
		args = append(args, "--kv-connector=mooncake", "--mooncake-bootstrap-port="+strconv.Itoa(int(VLLMMooncakeBootstrapPort)))
	}
	args = append(args, "--secure-proxy=false")
	if ServingScheme(role) == "https" {
		args = append(args, "--enable-tls=decoder", "--tls-insecure-skip-verify=decoder")
	}
	return ContainerTemplate{
		Name: ContainerRoutingProxy, Image: DefaultRoutingSidecarImage, Program: ProgramRoutingProxy,
		Args: args, Env: env, Ports: []ContainerPort{{Name: "http", Port: serving}},
	}
}
