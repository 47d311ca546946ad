package api

// Phases of status.phase (docs/operator.md#phase-and-endpoint).
const (
	PhaseStarting = "Starting"
	PhaseReady    = "Ready"
	PhaseDegraded = "Degraded"
	PhaseDeleting = "Deleting"
)

// Condition types and reasons the suite reads (docs/operator.md#conditions).
const (
	ConditionRouterReady      = "RouterReady"
	ConditionRoleKindsReady   = "RoleKindsReady"
	ConditionReplicasUpToDate = "ReplicasUpToDate"
	ConditionQuotaReserved    = "QuotaReserved"

	ReasonReady           = "Ready"
	ReasonNotApplicable   = "NotApplicable"
	ReasonRenderFailed    = "RenderFailed"
	ReasonNoReadyReplicas = "NoReadyReplicas"
	ReasonNotDeployed     = "NotDeployed"
	ReasonAllKindsReady   = "AllKindsReady"
	ReasonKindsNotReady   = "KindsNotReady"
	ReasonNoRoleStatuses  = "NoRoleStatuses"
)

// Serving states of status.roles[].endpoints.serving.state.
const (
	ServingConfirmed     = "Confirmed"
	ServingNotConverged  = "NotConverged"
	ServingUnknown       = "Unknown"
	ServingNotConfigured = "NotConfigured"
)

// Labels on operator-rendered objects (docs/operator.md#router-objects, docs/operator.md#engine-pods).
const (
	LabelName      = "app.kubernetes.io/name"      // "model-deployment"
	LabelInstance  = "app.kubernetes.io/instance"  // <md>
	LabelComponent = "app.kubernetes.io/component" // <role name>
	LabelRoleKind  = "modeldeployment.gpustack.ai/role-kind"
	LabelOrdinal   = "modeldeployment.gpustack.ai/pod-ordinal"
	LabelMember    = "modeldeployment.gpustack.ai/member-index"
	LabelRouter    = "modeldeployment.gpustack.ai/router" // on router objects: <router name>
	LabelPartOf    = "app.kubernetes.io/part-of"

	NameValue   = "model-deployment"
	PartOfValue = "gpustack-operator-worker"

	AnnotationPromPort   = "prometheus.io/port"
	AnnotationPromScheme = "prometheus.io/scheme"
	AnnotationPromPath   = "prometheus.io/path"
	AnnotationPromScrape = "prometheus.io/scrape"
)

// Ports the operator renders.
const (
	RouterHTTPPort    = 8081
	RouterMetricsPort = 9090
	EngineDefaultPort = 8000
)

// Container names.
const (
	ContainerRouter = "router" // vllm-router, sglang-gateway
	ContainerEPP    = "epp"    // llm-d-router
	ContainerEnvoy  = "envoy"  // llm-d-router
	ContainerEngine = "main"
)

// ModelDeploymentStatus is status (docs/operator.md#status). It has no
// observedGeneration of its own: the operator's API carries one per
// condition only (a real API server prunes a status.observedGeneration).
type ModelDeploymentStatus struct {
	Phase        string        `json:"phase,omitempty"`
	PhaseMessage string        `json:"phaseMessage,omitempty"`
	Endpoint     string        `json:"endpoint,omitempty"`
	RoleSummary  string        `json:"roleSummary,omitempty"`
	Roles        []RoleStatus  `json:"roles,omitempty"`
	Router       *RouterStatus `json:"router,omitempty"`
	Conditions   []Condition   `json:"conditions,omitempty"`
}

// RoleStatus is status.roles[].
// Name, desired, ready, quotaReserved, unmanaged and kind are always
// present: the operator's schema requires them, so a status without one is
// refused by the API server.
type RoleStatus struct {
	Name          string         `json:"name"`
	Kind          string         `json:"kind"`
	Desired       int32          `json:"desired"`
	Ready         int32          `json:"ready"`
	QuotaReserved int32          `json:"quotaReserved"`
	Unmanaged     bool           `json:"unmanaged"`
	Endpoints     *RoleEndpoints `json:"endpoints,omitempty"`
}

// RoleEndpoints is status.roles[].endpoints.
type RoleEndpoints struct {
	Eligible *int32       `json:"eligible,omitempty"`
	Serving  ServingState `json:"serving"`
}

// ServingState is status.roles[].endpoints.serving: Value is set only when Confirmed.
type ServingState struct {
	State string `json:"state"`
	Value *int32 `json:"value,omitempty"`
}

// RouterStatus is status.router.
type RouterStatus struct {
	Name     string             `json:"name"`
	Endpoint string             `json:"endpoint,omitempty"`
	Roles    []RouterRoleStatus `json:"roles,omitempty"`
}

// RouterRoleStatus is status.router.roles[]; Selector is the exact label
// equality set the router discovers by.
type RouterRoleStatus struct {
	Name     string            `json:"name"`
	Kind     string            `json:"kind"`
	Selector map[string]string `json:"selector,omitempty"`
	Endpoint string            `json:"endpoint,omitempty"`
}

// Condition is a metav1.Condition-shaped entry.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// FindCondition returns the condition of the given type, or nil.
func (s ModelDeploymentStatus) FindCondition(t string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}
