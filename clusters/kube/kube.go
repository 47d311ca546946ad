// Package kube is the clusters.Cluster for a real Kubernetes cluster running
// gpustack-operator: ModelDeployments are created as unstructured
// worker.gpustack.ai/v1alpha1 objects, one labelled namespace per deployment
// (with the Kueue LocalQueue the operator admits through), traffic goes through
// a self-healing port-forward to a router Pod, and metrics and logs through the
// API server's Pod proxy and pods/log. Facts: docs/operator.md.
//
// Ginkgo is the runner; this package uses e2e-framework (klient, envconf) and
// client-go as libraries and never calls Ginkgo itself.
package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/klient/conf"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/config"
)

// Labels this suite puts on everything it creates. Deletion checks them first,
// so a cleanup can never remove a namespace the suite did not create.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "routing-conformance"
	LabelRunID     = "routing-conformance.gpustack.ai/run-id"
)

// DefaultOperatorNamespace is where the operator chart installs (docs/operator.md#minimal-deployments).
const DefaultOperatorNamespace = "gpustack-system"

// Intervals are the waits the suite reads from e2e.yaml. Zero fields take the
// defaults in DefaultIntervals. The wait for a model to become Ready is not
// here: it is the context the suite passes to WaitReady (it can be 30 min).
type Intervals struct {
	// Poll is the pause between two reads of a status or a Pod list.
	Poll time.Duration
	// RouterRollout bounds Update's wait for the replacement router Pod.
	RouterRollout time.Duration
	// Delete bounds Delete and namespace removal (Pods drain ~6 s, the
	// router Deployment was seen lingering ~2 min: operator issue #601).
	Delete time.Duration
	// Request bounds one API or Pod-proxy call (metrics scrape, logs).
	Request time.Duration
	// PortForward bounds opening one port-forward tunnel.
	PortForward time.Duration
}

// DefaultIntervals are used for every zero field of Options.Intervals.
var DefaultIntervals = Intervals{
	Poll:          5 * time.Second,
	RouterRollout: 10 * time.Minute,
	Delete:        5 * time.Minute,
	Request:       30 * time.Second,
	PortForward:   30 * time.Second,
}

func (iv Intervals) withDefaults() Intervals {
	d := DefaultIntervals
	if iv.Poll > 0 {
		d.Poll = iv.Poll
	}
	if iv.RouterRollout > 0 {
		d.RouterRollout = iv.RouterRollout
	}
	if iv.Delete > 0 {
		d.Delete = iv.Delete
	}
	if iv.Request > 0 {
		d.Request = iv.Request
	}
	if iv.PortForward > 0 {
		d.PortForward = iv.PortForward
	}
	return d
}

// Options configure a Cluster. The zero value works against the current
// kubeconfig context.
type Options struct {
	// Kubeconfig is a kubeconfig path (the suite passes e2e.yaml's
	// kube.kubeconfig, which E2E_KUBECONFIG overrides). Empty: $KUBECONFIG,
	// then ~/.kube/config, then the in-cluster service account.
	Kubeconfig string
	// Context selects a kubeconfig context (empty: the current one).
	Context string
	// InCluster forces the in-cluster config and Service URLs for traffic
	// (set automatically when no kubeconfig is found inside a Pod).
	InCluster bool
	// Target names the target in Environment ("kube" unless set, "kind").
	Target string
	// RunID labels every namespace of this run; empty: a random id.
	RunID string
	// NamespacePrefix starts every created namespace name (default "rc";
	// a trailing "-" is allowed, e2e.yaml writes "rc-").
	NamespacePrefix string
	// NamespaceSuffix ends every created namespace name, e.g. "p2" for
	// Ginkgo parallel process 2 (empty: none).
	NamespaceSuffix string
	// OperatorNamespace is where the operator, its Deployment and Settings
	// live (default gpustack-system).
	OperatorNamespace string
	// PreflightNamespace receives the server-side dry-run create that proves
	// the webhooks answer; nothing is stored (default "default").
	PreflightNamespace string
	// InstanceType pins the InstanceType every role without one uses; empty:
	// the Active accelerated InstanceType with the most free accelerators.
	InstanceType string
	// EngineImages are the engine images the suite pins (e2e.yaml), engine
	// name -> image; images seen on engine Pods are added as they are read.
	EngineImages map[string]string
	// Intervals are the waits; zero fields take DefaultIntervals.
	Intervals Intervals
	// Logf receives progress lines (e.g. GinkgoWriter.Printf); nil: silent.
	Logf func(format string, args ...any)
}

// Clients are the API handles a Cluster works through. Production code gets
// them from New; tests hand in client-go fakes.
type Clients struct {
	// Kube reads and writes core objects (namespaces, Pods, events, nodes,
	// access reviews) and does discovery.
	Kube kubernetes.Interface
	// Dynamic reads and writes the CRDs (ModelDeployment, InstanceType,
	// LocalQueue, Setting) as unstructured objects.
	Dynamic dynamic.Interface
	// PodIO serves pods/log and the pods/proxy subresource; nil: Kube.
	PodIO kubernetes.Interface
	// Forwarder opens port-forwards; nil: SPDY through RESTConfig.
	Forwarder Forwarder
	// RESTConfig is the config the clients were made from (may be nil in tests).
	RESTConfig *rest.Config
}

// Cluster is a clusters.Cluster backed by a real API server.
type Cluster struct {
	opts      Options
	iv        Intervals
	kube      kubernetes.Interface
	dyn       dynamic.Interface
	podIO     kubernetes.Interface
	fwd       Forwarder
	restCfg   *rest.Config
	host      string
	inCluster bool

	mu          sync.Mutex
	deployments map[*Deployment]struct{}
	engineSeen  map[string]string
	kueueGV     string // "kueue.x-k8s.io/v1beta2" once discovered
}

var (
	_ clusters.Cluster         = (*Cluster)(nil)
	_ clusters.CapacityChecker = (*Cluster)(nil)
)

// ClientQPS and ClientBurst are the client's rate limit when the kubeconfig
// sets none. client-go's default (5 per second, bursts of 10) held every
// preflight (two dozen access reviews) for about 5 s against the apiserver
// tier's real API server, and throttles the suite's parallel polls the same
// way on any cluster.
const (
	ClientQPS   = 50
	ClientBurst = 100
)

// New builds a Cluster from a kubeconfig (see Options.Kubeconfig) or the
// in-cluster config. It contacts nothing: call Preflight before the first spec.
// Errors are one line naming what is missing and how to fix it.
func New(opts Options) (*Cluster, error) {
	cfg, inCluster, err := restConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = ClientQPS, ClientBurst
	}
	// klient/envconf are how e2e-framework carries a cluster connection; the
	// suite's SynchronizedBeforeSuite may reuse EnvConfig() for its own helpers.
	kc, err := klient.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	cfg = kc.RESTConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", cfg.Host, err)
	}
	opts.InCluster = opts.InCluster || inCluster
	return NewWithClients(Clients{Kube: kube, Dynamic: dyn, RESTConfig: cfg, Forwarder: NewSPDYForwarder(cfg, kube)}, opts), nil
}

// NewWithClients builds a Cluster over given clients (fakes in tests, or a
// config the caller already holds, e.g. a kind cluster's).
func NewWithClients(c Clients, opts Options) *Cluster {
	if opts.Target == "" {
		opts.Target = config.TargetKube
	}
	if opts.RunID == "" {
		opts.RunID = randomSuffix(8)
	}
	if opts.NamespacePrefix == "" {
		opts.NamespacePrefix = "rc"
	}
	if opts.OperatorNamespace == "" {
		opts.OperatorNamespace = DefaultOperatorNamespace
	}
	if opts.PreflightNamespace == "" {
		opts.PreflightNamespace = "default"
	}
	podIO := c.PodIO
	if podIO == nil {
		podIO = c.Kube
	}
	host := "the API server"
	if c.RESTConfig != nil {
		host = c.RESTConfig.Host
	}
	seen := map[string]string{}
	for k, v := range opts.EngineImages {
		seen[k] = v
	}
	return &Cluster{
		opts:        opts,
		iv:          opts.Intervals.withDefaults(),
		kube:        c.Kube,
		dyn:         c.Dynamic,
		podIO:       podIO,
		fwd:         c.Forwarder,
		restCfg:     c.RESTConfig,
		host:        host,
		inCluster:   opts.InCluster,
		deployments: map[*Deployment]struct{}{},
		engineSeen:  seen,
	}
}

// Connect is New followed by Preflight: what a suite's BeforeSuite calls.
func Connect(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	if err := c.Preflight(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// RunID is the value of LabelRunID on this run's namespaces.
func (c *Cluster) RunID() string { return c.opts.RunID }

// RESTConfig is the config the clients use (nil when built from fakes).
func (c *Cluster) RESTConfig() *rest.Config { return c.restCfg }

// EnvConfig wraps the connection as an e2e-framework envconf.Config for
// helpers written against e2e-framework (klient resources, wait conditions).
func (c *Cluster) EnvConfig() (*envconf.Config, error) {
	if c.restCfg == nil {
		return nil, fmt.Errorf("kube: no REST config (the cluster was built from fake clients)")
	}
	kc, err := klient.New(c.restCfg)
	if err != nil {
		return nil, err
	}
	return envconf.New().WithClient(kc).WithKubeconfigFile(c.opts.Kubeconfig), nil
}

// Close stops every port-forward this Cluster opened. It deletes nothing:
// deployments and namespaces are removed by Deployment.Delete (DeferCleanup)
// and DeleteRunNamespaces.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	deps := make([]*Deployment, 0, len(c.deployments))
	for d := range c.deployments {
		deps = append(deps, d)
	}
	c.mu.Unlock()
	for _, d := range deps {
		d.closeProxy()
		d.closeCost()
	}
	return nil
}

// disco is discovery with context support (cancellation of slow servers).
func (c *Cluster) disco() discovery.DiscoveryInterfaceWithContext {
	return discovery.ToDiscoveryInterfaceWithContext(c.kube.Discovery())
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

func (c *Cluster) track(d *Deployment) {
	c.mu.Lock()
	c.deployments[d] = struct{}{}
	c.mu.Unlock()
}

func (c *Cluster) untrack(d *Deployment) {
	c.mu.Lock()
	delete(c.deployments, d)
	c.mu.Unlock()
}

func (c *Cluster) sawEngineImage(engine, image string) {
	if engine == "" || image == "" {
		return
	}
	c.mu.Lock()
	c.engineSeen[engine] = image
	c.mu.Unlock()
}

func (c *Cluster) engineImages() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.engineSeen) == 0 {
		return nil
	}
	out := make(map[string]string, len(c.engineSeen))
	for k, v := range c.engineSeen {
		out[k] = v
	}
	return out
}

// restConfig resolves the connection the way kubectl and e2e-framework do,
// and turns every failure into one actionable line.
func restConfig(opts Options) (*rest.Config, bool, error) {
	inPod := os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	if opts.InCluster {
		cfg, err := conf.NewInCluster()
		if err != nil {
			return nil, false, fmt.Errorf("in-cluster config: %v; run inside a Pod with a service account (see deploy/rbac/) or pass a kubeconfig", err)
		}
		return cfg, true, nil
	}
	path := opts.Kubeconfig
	if path == "" {
		path = conf.ResolveKubeConfigFile()
	}
	if path == "" {
		if inPod {
			cfg, err := conf.NewInCluster()
			if err != nil {
				return nil, false, fmt.Errorf("no kubeconfig and the in-cluster config failed: %v; set KUBECONFIG", err)
			}
			return cfg, true, nil
		}
		return nil, false, fmt.Errorf("no kubeconfig: set E2E_KUBECONFIG=/path/to/kubeconfig (make e2e E2E_TARGET=kube E2E_KUBECONFIG=...), or KUBECONFIG, or kube.kubeconfig in e2e.yaml, or create ~/.kube/config")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, false, fmt.Errorf("kubeconfig %s: %v; point E2E_KUBECONFIG (or KUBECONFIG, or kube.kubeconfig in e2e.yaml) at an existing file", path, firstLine(err.Error()))
	}
	var cfg *rest.Config
	var err error
	if opts.Context != "" {
		cfg, err = conf.NewWithContextName(path, opts.Context)
	} else {
		cfg, err = conf.New(path)
	}
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, false, fmt.Errorf("kubeconfig %s has no current context: run kubectl config use-context <name> or set the context option", path)
		}
		return nil, false, fmt.Errorf("kubeconfig %s: %s; check it with kubectl --kubeconfig %s get ns", path, firstLine(err.Error()), path)
	}
	return cfg, false, nil
}

// AcceleratorsNeeded is how many whole accelerators md asks for: every role's
// replicas × size × accelerators per Pod (the webhook defaults an unset
// per-Pod count to 1 on an accelerated InstanceType).
func AcceleratorsNeeded(md *api.ModelDeployment) int64 {
	var n int64
	for _, r := range md.Spec.Roles {
		n += roleAccelerators(r)
	}
	return n
}

// roleAccelerators is one role's share of AcceleratorsNeeded.
// RoleAccelerators is what a role's Pods hold at once: replicas × size ×
// spec.resources.accelerator (make plan's projection counts with it).
func RoleAccelerators(r api.Role) int64 { return roleAccelerators(r) }

// PodAccelerators is what one of a role's Pods holds.
func PodAccelerators(r api.Role) int64 { return podAccelerators(r) }

func roleAccelerators(r api.Role) int64 {
	size := int64(1)
	if r.Size != nil {
		size = int64(*r.Size)
	}
	return int64(r.RoleReplicas()) * size * podAccelerators(r)
}

// podAccelerators is spec.resources.accelerator, the cards each of the
// role's Pods holds (1 when unset, the webhook's default on an accelerated
// InstanceType).
func podAccelerators(r api.Role) int64 {
	if r.Resources != nil && r.Resources.Accelerator != "" {
		return parseQuantityInt(r.Resources.Accelerator, 1)
	}
	return 1
}

func randomSuffix(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on Linux; a clock-derived suffix still
		// keeps names apart if it ever does.
		return fmt.Sprintf("%x", time.Now().UnixNano())[:n]
	}
	return hex.EncodeToString(b)[:n]
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
