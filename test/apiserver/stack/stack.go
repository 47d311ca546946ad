// Package stack brings up everything the kube target needs from a cluster,
// on the tier's real API server: the control plane with the namespace,
// garbage-collector, deployment and ReplicaSet controllers (package
// harness), the operator's and Kueue's API with an accelerated InstanceType
// (install), the sim operator's webhooks (sim/apiserver/webhook), the sim
// operator's reconcile loop (sim/apiserver/operator) and a sim node running the
// Pods (sim/apiserver/node).
// Stop takes it down in reverse order and checks nothing is left.
package stack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/sim/apiserver/node"
	"github.com/gpustack/routing-conformance/sim/apiserver/operator"
	"github.com/gpustack/routing-conformance/sim/apiserver/webhook"
	"github.com/gpustack/routing-conformance/sim/engine"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/programs"
	"github.com/gpustack/routing-conformance/sim/upstream"
	"github.com/gpustack/routing-conformance/sim/upstream/upstreamtest"
	"github.com/gpustack/routing-conformance/test/apiserver/harness"
	"github.com/gpustack/routing-conformance/test/apiserver/install"
	"github.com/gpustack/routing-conformance/test/apiserver/netns"
	"github.com/gpustack/routing-conformance/test/apiserver/rbac"
)

// Controllers are the kube-controller-manager controllers a stack runs:
// namespace finalization, garbage collection (owner references), and the
// Deployment and ReplicaSet controllers that roll the router Deployment.
var Controllers = append(append([]string{}, harness.DefaultControllers...), "deployment-controller", "replicaset-controller")

// OperatorNamespace is where the operator would run; the kube target reads
// its Deployment and Setting there and deploy/rbac grants a Role in it.
const OperatorNamespace = kube.DefaultOperatorNamespace

// stopTimeout bounds Stop.
const stopTimeout = time.Minute

// requestTimeout bounds one API call of the stack's.
const requestTimeout = 10 * time.Second

// Options tune Start; the zero value is the stack the suite runs on.
type Options struct {
	// Harness options; Controllers default to this package's Controllers.
	Harness harness.Options
	// EngineEnv is every engine's environment: the sim's latency knobs.
	// Nil: EngineEnv(config.Default().Sim). A suite run passes its own
	// config's (the repository's e2e.yaml sim: section), so the engines
	// behind the API server run as the sim run's do.
	EngineEnv map[string]string
	// Logf receives the operator's and the node's complaints (t.Logf when nil).
	Logf func(format string, args ...any)
	// Programs override the node's programs field by field; nil fields run
	// the sim's emulators and, for vllm-router and sgl-model-gateway, the
	// binaries make routers built, given this API server's kubeconfig so
	// their own discovery finds the engines through it.
	Programs programs.Registry
	// EPP, when set (and Programs.EPP is not), is llm-d-router's built EPP
	// (make upstream-llmd) as the llm-d router Pods' epp container: it
	// discovers the engines through this API server by the rendered
	// selector, as the Pod's ServiceAccount (a token bound to the Pod, as a
	// kubelet projects one), so with the RBAC the operator renders. Nil:
	// the sim's emulated EPP, which the suite runs compare with the plain
	// sim's.
	EPP *upstream.EPPInstall
	// EPPStarted, when set, is told each built EPP process's start.
	EPPStarted func(upstream.Start)
}

// Stack is a running cluster of the tier.
type Stack struct {
	*harness.Cluster
	Kube     kubernetes.Interface
	Webhooks *webhook.Server
	Operator *operator.Operator
	Node     *node.Node

	// node is Node for the programs, which may run before start returns.
	node  atomic.Pointer[node.Node]
	stops []func(context.Context) error
}

// Start brings the stack up or fails t; it is stopped when t ends.
func Start(t *testing.T, opts Options) *Stack {
	t.Helper()
	if len(opts.Harness.Controllers) == 0 {
		opts.Harness.Controllers = Controllers
	}
	if opts.EngineEnv == nil {
		opts.EngineEnv = EngineEnv(config.Default().Sim)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	// The routers built from source (make routers): skipped without a
	// build, a failure under CI=true.
	var routers *upstream.Install
	if opts.Programs.VLLMRouter == nil || opts.Programs.SGLangGateway == nil {
		routers = upstreamtest.Install(t)
	}
	c := harness.Start(t, opts.Harness)
	s := &Stack{Cluster: c, Kube: kubernetes.NewForConfigOrDie(c.Config)}
	if routers != nil {
		ro := upstream.Options{Kubeconfig: c.Kubeconfig}
		opts.Programs = opts.Programs.Merge(programs.Registry{
			VLLMRouter: routers.Program(api.RouterVLLM, ro), SGLangGateway: routers.Program(api.RouterSGLang, ro)})
	}
	if opts.EPP != nil {
		opts.Programs = opts.Programs.Merge(programs.Registry{EPP: opts.EPP.EPPProgram(upstream.EPPOptions{
			PodKubeconfig: s.podKubeconfig, Resolve: s.resolveService, Started: opts.EPPStarted})})
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stack: %v", err)
		}
	})
	if err := s.start(t.Context(), opts); err != nil {
		t.Fatalf("stack: %v", err)
	}
	return s
}

func (s *Stack) start(ctx context.Context, opts Options) error {
	if _, err := install.All(ctx, s.Config); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	wh, err := webhook.Serve()
	if err != nil {
		return err
	}
	s.onStop(func(context.Context) error { return wh.Close() })
	s.Webhooks = wh
	if err := webhook.Register(ctx, s.Config, wh, "default"); err != nil {
		return err
	}
	nd, err := node.Start(ctx, s.Config, node.Options{PodCIDR: netns.PodCIDR, Logf: opts.Logf, Programs: opts.Programs,
		Kubelet: kubelet.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: time.Second}})
	if err != nil {
		return err
	}
	s.onStop(nd.Stop)
	s.Node = nd
	s.node.Store(nd)
	op, err := operator.Start(ctx, s.Config, operator.Options{EngineEnv: opts.EngineEnv, Logf: opts.Logf})
	if err != nil {
		return err
	}
	s.onStop(op.Stop)
	s.Operator = op
	return nil
}

// podKubeconfig writes a kubeconfig for the ServiceAccount a Pod runs as,
// with a token bound to the Pod: what a kubelet mounts in a Pod, so the
// process is allowed what the Pod's RBAC grants and nothing more.
func (s *Stack) podKubeconfig(ctx context.Context, pod proc.PodInfo, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	p, err := s.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default" // the ServiceAccount admission plugin's default (off in the tier)
	}
	file := filepath.Join(dir, "kubeconfig")
	return file, rbac.ServiceAccountKubeconfig(ctx, s.Config, pod.Namespace, sa, &authenticationv1.BoundObjectReference{
		Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}, file)
}

// resolveService resolves Service names through the node (kube-proxy's
// part), for the EPP's cluster-dns row.
func (s *Stack) resolveService(ctx context.Context, svc, ns, port string) (string, error) {
	n := s.node.Load()
	if n == nil {
		return "", errors.New("stack: no node yet")
	}
	return n.ResolveService(ctx, svc, ns, port)
}

// EngineEnv is the engines' SIM_ENGINE_* environment for a config's sim
// settings, as the sim target sets it.
func EngineEnv(sim config.Sim) map[string]string {
	return map[string]string{engine.EnvTTFT: sim.EngineTTFT.D().String(), engine.EnvITL: sim.EngineITL.D().String(),
		engine.EnvOutputTokens: fmt.Sprint(sim.EngineOutputTokens)}
}

func (s *Stack) onStop(f func(context.Context) error) { s.stops = append(s.stops, f) }

// Stop ends the operator, the node (its Pods), the webhooks and the control
// plane, in that order. It is safe to call more than once.
func (s *Stack) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	var errs []error
	for i := len(s.stops) - 1; i >= 0; i-- {
		errs = append(errs, s.stops[i](ctx))
	}
	s.stops = nil
	s.Cluster.Stop()
	return errors.Join(errs...)
}

// KubeOptions are the kube target's options for this stack: its kubeconfig,
// polls sized for an API server that answers in milliseconds, and logf.
func (s *Stack) KubeOptions(logf func(string, ...any)) kube.Options {
	return kube.Options{
		Kubeconfig: s.Kubeconfig, PreflightNamespace: "default", OperatorNamespace: OperatorNamespace,
		Intervals: kube.Intervals{Poll: 100 * time.Millisecond, RouterRollout: time.Minute, Delete: time.Minute,
			Request: 10 * time.Second, PortForward: 10 * time.Second},
		Logf: logf,
	}
}
