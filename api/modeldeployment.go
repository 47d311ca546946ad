// Package api holds the gpustack-operator ModelDeployment object as the suite
// reads and writes it (worker.gpustack.ai/v1alpha1), plus the label, condition
// and reason constants the operator publishes. Facts: docs/operator.md.
//
// Both targets use these types: the kube target converts them to unstructured
// objects, the sim target admits and renders them as the operator does.
package api

// Identity of the CRD (docs/operator.md#api-identity).
const (
	Group      = "worker.gpustack.ai"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
	Kind       = "ModelDeployment"
	Resource   = "modeldeployments"
)

// Engine names (spec.engine.name enum).
const (
	EngineVLLM   = "vLLM"
	EngineSGLang = "SGLang"
)

// Router names (spec.router.name enum).
const (
	RouterLLMD   = "llm-d-router"
	RouterVLLM   = "vllm-router"
	RouterSGLang = "sglang-gateway"
)

// Role kinds (spec.roles[].kind enum).
const (
	RoleKindServer  = "Server"
	RoleKindPrefill = "Prefill"
	RoleKindDecode  = "Decode"
)

// Engines lists the accepted spec.engine.name values.
var Engines = []string{EngineVLLM, EngineSGLang}

// Routers lists the accepted spec.router.name values.
var Routers = []string{RouterLLMD, RouterVLLM, RouterSGLang}

// RoleKinds lists the accepted spec.roles[].kind values.
var RoleKinds = []string{RoleKindServer, RoleKindPrefill, RoleKindDecode}

// ModelDeployment is the operator's custom resource.
type ModelDeployment struct {
	APIVersion string                `json:"apiVersion"`
	Kind       string                `json:"kind"`
	Metadata   ObjectMeta            `json:"metadata"`
	Spec       ModelDeploymentSpec   `json:"spec"`
	Status     ModelDeploymentStatus `json:"status,omitempty"`
}

// ObjectMeta is the subset of Kubernetes metadata the suite uses.
type ObjectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
}

// ModelDeploymentSpec is spec (docs/operator.md#spec-fields).
type ModelDeploymentSpec struct {
	Model      Model       `json:"model"`
	Engine     Engine      `json:"engine"`
	Roles      []Role      `json:"roles"`
	Router     *Router     `json:"router,omitempty"`
	KVCache    *KVCache    `json:"kvCache,omitempty"`
	KVTransfer *KVTransfer `json:"kvTransfer,omitempty"`
}

// Model is spec.model; Name is the served model name clients must send.
type Model struct {
	Name        string          `json:"name"`
	ArtifactRef *LocalObjectRef `json:"artifactRef,omitempty"`
}

// LocalObjectRef names an object in the same namespace.
type LocalObjectRef struct {
	Name string `json:"name"`
}

// Engine is spec.engine.
type Engine struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Role is one entry of spec.roles.
type Role struct {
	Name                          string     `json:"name"`
	Kind                          string     `json:"kind,omitempty"`
	Replicas                      *int32     `json:"replicas,omitempty"`
	Size                          *int32     `json:"size,omitempty"`
	InstanceType                  string     `json:"instanceType"`
	Resources                     *Resources `json:"resources,omitempty"`
	Image                         string     `json:"image,omitempty"`
	ImagePullPolicy               string     `json:"imagePullPolicy,omitempty"`
	Ports                         []Port     `json:"ports,omitempty"`
	ExtraArgs                     []string   `json:"extraArgs,omitempty"`
	Env                           []EnvVar   `json:"env,omitempty"`
	TerminationGracePeriodSeconds *int64     `json:"terminationGracePeriodSeconds,omitempty"`
	Command                       []string   `json:"command,omitempty"`
}

// Resources is spec.roles[].resources.
type Resources struct {
	Accelerator string `json:"accelerator,omitempty"`
}

// Port is spec.roles[].ports[]; the first entry is the serving port.
type Port struct {
	Port     int32  `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// EnvVar is a name/value pair. Value is always written, even empty: the
// operator's schema requires it (ModelDeploymentEnvVar, gpustack/gpustack-operator
// api/worker/v1alpha1/model_deployment.go), so an omitted empty value is refused.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Router is spec.router.
type Router struct {
	Name                          string   `json:"name"`
	Replicas                      *int32   `json:"replicas,omitempty"`
	Image                         string   `json:"image,omitempty"`
	ImagePullPolicy               string   `json:"imagePullPolicy,omitempty"`
	ExtraArgs                     []string `json:"extraArgs,omitempty"`
	RequestTimeoutSeconds         *int32   `json:"requestTimeoutSeconds,omitempty"`
	DisaggregationThresholdTokens *int32   `json:"disaggregationThresholdTokens,omitempty"`
}

// KVCache is spec.kvCache (frozen; not needed for routing).
type KVCache struct {
	PoolRef   *LocalObjectRef `json:"poolRef,omitempty"`
	Connector string          `json:"connector,omitempty"`
}

// KVTransfer is spec.kvTransfer.
type KVTransfer struct {
	Protocol string `json:"protocol,omitempty"`
}

// RoleReplicas returns a role's replicas with the API default (1) applied.
func (r Role) RoleReplicas() int32 {
	if r.Replicas == nil {
		return 1
	}
	return *r.Replicas
}

// RoleKind returns the role's kind with the API default (Server) applied.
func (r Role) RoleKind() string {
	if r.Kind == "" {
		return RoleKindServer
	}
	return r.Kind
}

// RouterReplicas returns spec.router.replicas with the API default (1) applied.
func (r Router) RouterReplicas() int32 {
	if r.Replicas == nil {
		return 1
	}
	return *r.Replicas
}

// Ptr returns a pointer to v; handy for the optional int fields.
func Ptr[T any](v T) *T { return &v }
