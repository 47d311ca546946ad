// Package clusters is the seam between the specs and a target: the sim
// (everything in-process on loopback), kube (a real cluster with
// gpustack-operator) and kind (a throwaway cluster run as kube). Specs only
// see what a user can observe: HTTP answers, logs, metrics and status.
package clusters

import (
	"context"
	"fmt"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/metrics"
)

// Cluster is a target that can run ModelDeployments.
type Cluster interface {
	// Describe reports versions, GPU product and which router/engine pairs this
	// target can run, so specs can skip with a reason instead of failing.
	Describe(ctx context.Context) (Environment, error)
	// Deploy creates the ModelDeployment. An admission refusal is returned as
	// *AdmissionError; the object is then not created.
	Deploy(ctx context.Context, md *api.ModelDeployment) (Deployment, error)
	// Close releases what the target holds (port-forwards, sim servers).
	Close(ctx context.Context) error
}

// CapacityChecker is implemented by targets whose capacity can run out (a
// GPU cluster). Before deploying anything that must serve, the suite asks, and
// skips with the reason instead of failing on Pods that wait for accelerators.
type CapacityChecker interface {
	// CanRun reports whether md's roles fit the free accelerators now; reason
	// says what is short when they do not.
	CanRun(ctx context.Context, md *api.ModelDeployment) (ok bool, reason string, err error)
}

// Deployment is one created ModelDeployment.
type Deployment interface {
	Name() string
	Namespace() string
	// Object returns the live object with its status.
	Object(ctx context.Context) (*api.ModelDeployment, error)
	// WaitReady blocks until phase Ready, RouterReady=True and every role's
	// endpoints.serving is Confirmed with value == desired, or ctx ends, or
	// the deployment is stuck for good (see WaitReady in this package).
	// The error says which of those was last missing.
	WaitReady(ctx context.Context, poll time.Duration) error
	// OpenAIBaseURL is the router's OpenAI base URL ending in /v1.
	OpenAIBaseURL(ctx context.Context) (string, error)
	// RouterLogs returns the router container's output (stdout and stderr as
	// kubectl logs shows them, ANSI codes included).
	RouterLogs(ctx context.Context, opts LogOptions) (string, error)
	// RouterState describes the router Pod(s).
	RouterState(ctx context.Context) ([]RouterPod, error)
	// RouterMetrics scrapes :9090 of every router Pod, merged; each
	// sample's metrics.SourceLabel is its Pod's name (RouterPod.Name).
	RouterMetrics(ctx context.Context) (metrics.Snapshot, error)
	// Replicas lists the engine replicas (leader Pods), sorted by name.
	Replicas(ctx context.Context) ([]Replica, error)
	// EngineMetrics scrapes one replica's engine /metrics.
	EngineMetrics(ctx context.Context, r Replica) (metrics.Snapshot, error)
	// RouterConfig returns the data of the router ConfigMap the operator
	// rendered, <md>-router, read live: epp.yaml, envoy.yaml,
	// endpoint-selector, endpoint-target-ports and extra-args.json. Only
	// llm-d-router has one; for the others the error wraps ErrNotFound.
	RouterConfig(ctx context.Context) (map[string]string, error)
	// Update applies mutate to the spec and submits it; admission refusals
	// come back as *AdmissionError.
	Update(ctx context.Context, mutate func(*api.ModelDeployment)) error
	// CollectArtifacts writes logs, object/status, events and metrics under dir.
	// It never fails a spec on a partial dump; it returns the joined errors.
	CollectArtifacts(ctx context.Context, dir string) error
	// Delete removes the deployment and waits until its objects are gone.
	Delete(ctx context.Context) error
	// Cost is what the deployment has held of the target's scarcest resource
	// so far, counted from Deploy on; after Delete it is final. Every
	// deployment on a GPU cluster is an image pull and a model load per
	// engine Pod.
	Cost(ctx context.Context) (Cost, error)
}

// PickerSeeder is implemented by deployments whose target knows the seed
// of each llm-d EPP's random tie-break (the sim, which seeds them; a real
// EPP seeds from its clock and does not say).
type PickerSeeder interface {
	// PickerSeeds maps each live router Pod's name to its EPP's seed.
	PickerSeeds(ctx context.Context) (map[string]uint64, error)
}

// Cost counts one deployment's engine Pods and accelerator time (a
// CostLedger sums it).
type Cost struct {
	// EnginePodsStarted counts engine Pods created for the deployment
	// (replacements and every member of a multi-Pod replica included).
	EnginePodsStarted int `json:"enginePodsStarted"`
	// EnginePodsReady counts engine Pods that became Ready at least once.
	EnginePodsReady int `json:"enginePodsReady"`
	// AcceleratorSeconds sums, over engine Pods, the accelerators a Pod
	// requests times the seconds from its first Ready to its removal (or to
	// Delete's end, or now). It is 0 on the sim, whose Pods hold none.
	AcceleratorSeconds float64 `json:"acceleratorSeconds"`
}

// LogOptions selects which router logs to read.
type LogOptions struct {
	// Container defaults to "router" (argv routers) or "epp" (llm-d).
	Container string
	// Previous reads the last terminated container instead of the current one.
	Previous bool
	// Since limits the logs to lines after this time (zero = all).
	Since time.Time
}

// RouterPod is the observable state of one router Pod.
type RouterPod struct {
	Name     string `json:"name"`
	UID      string `json:"uid"`
	IP       string `json:"ip"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	// Waiting is the container's waiting reason, e.g. CrashLoopBackOff.
	Waiting string `json:"waiting,omitempty"`
	// LastExitCode is the exit code of the last terminated container, if any.
	LastExitCode *int32 `json:"lastExitCode,omitempty"`
}

// Replica is one engine replica (serving instance) as the router sees it.
type Replica struct {
	Name string `json:"name"` // Pod name
	UID  string `json:"uid"`  // Pod UID: a replaced replica has a new one
	Role string `json:"role"` // spec.roles[].name
	Kind string `json:"kind"` // Server, Prefill or Decode
	IP   string `json:"ip"`   // Pod IP
	Port int    `json:"port"` // serving port
	// MetricsPort is the prometheus.io/port annotation (the engine listener).
	MetricsPort int `json:"metricsPort"`
}

// ReplicaUIDs are replicas' Pod UIDs by name: a replaced Pod has a new one.
func ReplicaUIDs(rs []Replica) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		out[r.Name] = r.UID
	}
	return out
}

// URL is the worker URL a router uses for this replica: http://<ip>:<port>.
func (r Replica) URL() string {
	return fmt.Sprintf("http://%s:%d", bracketIPv6(r.IP), r.Port)
}

func bracketIPv6(ip string) string {
	for _, c := range ip {
		if c == ':' {
			return "[" + ip + "]"
		}
	}
	return ip
}

// Environment describes the target for the report and for capability checks.
type Environment struct {
	Target string `json:"target"` // sim, kube, kind
	// Cluster names the cluster for the report: its kubeconfig context or
	// API server (kube, kind).
	Cluster           string            `json:"cluster,omitempty"`
	KubernetesVersion string            `json:"kubernetesVersion,omitempty"`
	OperatorVersion   string            `json:"operatorVersion,omitempty"`
	RouterImage       string            `json:"routerImage,omitempty"`
	EngineImages      map[string]string `json:"engineImages,omitempty"` // engine name -> image
	GPUProduct        string            `json:"gpuProduct,omitempty"`
	// Accelerators remaining per Active InstanceType.
	Accelerators map[string]int64 `json:"accelerators,omitempty"`
	// Pairs lists what the target can run; a pair missing here is skipped.
	Pairs []PairSupport `json:"pairs"`
	// Notes are free-form lines for the report (e.g. "engines are simulated").
	Notes []string `json:"notes,omitempty"`
}

// PairSupport is whether the target can run a router/engine pair.
type PairSupport struct {
	api.Pair
	Supported bool `json:"supported"`
	// Reason explains an unsupported pair (shown as the skip reason).
	Reason string `json:"reason,omitempty"`
	// RouterCode is which code runs as the pair's router, on a target that
	// runs routers itself (routercode.go); nil on a cluster.
	RouterCode *RouterCode `json:"routerCode,omitempty"`
}

// Supports reports whether the target can run router+engine, and why not.
func (e Environment) Supports(router, engine string) (bool, string) {
	for _, s := range e.Pairs {
		if s.Router == router && s.Engine == engine {
			return s.Supported, s.Reason
		}
	}
	return false, fmt.Sprintf("target %s does not offer %s with %s", e.Target, router, engine)
}

// AdmissionError is a refusal by the operator's admission webhook, as every
// target returns it (api.AdmissionError, which the sim's operator returns).
type AdmissionError = api.AdmissionError
