// Package node is a node agent for the apiserver tier: it registers a
// Node with a real API server, binds the Pods nobody scheduled to it, runs
// the Pods bound to it on the sim's kubelet (package sim/kubelet)
// with the sim's router and engine programs, writes their status and events
// back, and serves the kubelet API the API server calls for pods/log and
// pods/portforward. Routers discover engines through the API server (the
// informer's Pods), as the real ones do.
//
// Its addresses come from Options.PodCIDR, a range that must be on a local
// interface and outside 127.0.0.0/8 (the API server proxies to no loopback
// address): the tier puts it on the loopback of a private network namespace.
package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/gpustack/routing-conformance/sim/apiserver/podconv"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/programs"
)

// Defaults for Options.
const (
	DefaultName        = "sim-node"
	DefaultKubeletPort = 10250
	DefaultGPUs        = 8
	// ResourceGPU is the extended resource a GPU node advertises.
	ResourceGPU = "nvidia.com/gpu"
	// LabelGPUProduct is what NVIDIA GPU feature discovery labels a node with.
	LabelGPUProduct = "nvidia.com/gpu.product"
)

// requestTimeout bounds one API call of the agent.
const requestTimeout = 10 * time.Second

// Options configure a Node; zero values take the defaults.
type Options struct {
	// Name is the Node's name (default sim-node).
	Name string
	// PodCIDR is the IPv4 /16 the Pods' addresses come from (the sim
	// kubelet's Options.PodCIDR; its first /24 is left to the node). It must
	// be on a local interface and not loopback; required.
	PodCIDR string
	// IP is the Node's InternalIP, where the API server reaches the kubelet
	// API; it must be local (default: PodCIDR's first address, e.g. 10.244.0.1).
	IP string
	// KubeletPort is the kubelet API's HTTPS port (default 10250).
	KubeletPort int
	// GPUs is the nvidia.com/gpu capacity (default 8).
	GPUs int64
	// GPUProduct labels the Node (nvidia.com/gpu.product); empty: none.
	GPUProduct string
	// Programs are the images: which emulator runs a container's command
	// (default: the sim's, wired to this node; see programsFor).
	Programs programs.Registry
	// Kubelet tunes the sim's kubelet (back-off); PodCIDR, NodeName and the
	// sinks are the agent's.
	Kubelet kubelet.Options
	// Logf receives what the agent could not do (an API write that failed).
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() (Options, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.IP == "" {
		first, err := firstAddress(o.PodCIDR)
		if err != nil {
			return o, err
		}
		o.IP = first
	}
	if o.KubeletPort == 0 {
		o.KubeletPort = DefaultKubeletPort
	}
	if o.GPUs == 0 {
		o.GPUs = DefaultGPUs
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o, nil
}

// firstAddress is the first host address of an IPv4 range: 10.244.0.1 for
// 10.244.0.0/16.
func firstAddress(cidr string) (string, error) {
	if cidr == "" {
		return "", errors.New("sim node: Options.PodCIDR is required")
	}
	_, n, err := net.ParseCIDR(cidr)
	if err != nil || n.IP.To4() == nil {
		return "", fmt.Errorf("sim node: PodCIDR %q is not an IPv4 range", cidr)
	}
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String(), nil
}

// Node is a running node agent. Stop ends it.
type Node struct {
	opts   Options
	kube   kubernetes.Interface
	kubel  *kubelet.Kubelet
	pods   listerscorev1.PodLister
	synced cache.InformerSynced
	events record.EventRecorder
	bcast  record.EventBroadcaster
	server *kubeletServer

	work     workqueue.TypedRateLimitingInterface[string] // Pods to run, bind or delete
	statuses workqueue.TypedRateLimitingInterface[string] // Pods whose status to write
	watch    *podconv.Watcher

	mu     sync.Mutex
	latest map[string]kubelet.PodUpdate // the kubelet's last word per Pod

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start registers the Node, starts the kubelet API and begins running the
// Pods bound to it. ctx bounds the start only.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Node, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n := &Node{
		opts: opts, kube: kube, cancel: cancel, latest: map[string]kubelet.PodUpdate{},
		work:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		statuses: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	informer := factory.Core().V1().Pods()
	n.pods, n.synced = informer.Lister(), informer.Informer().HasSynced
	n.watch = podconv.NewWatcher(n.pods)
	if _, err := informer.Informer().AddEventHandler(n.handler()); err != nil {
		cancel()
		return nil, err
	}

	n.bcast = record.NewBroadcaster(record.WithContext(runCtx))
	n.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	n.events = n.bcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: opts.Name})

	kopts := opts.Kubelet
	kopts.PodCIDR = opts.PodCIDR
	kopts.NodeName = opts.Name
	kopts.PodWatcher = n.watch
	kopts.StatusSink = n.kubeletChanged
	kopts.EventSink = n.kubeletEvent
	kopts.ConfigMaps = n.configMap
	n.opts.Programs = n.programsFor(opts)
	n.kubel = kubelet.New(kopts)

	fail := func(err error) (*Node, error) {
		n.Stop(context.Background())
		return nil, err
	}
	if n.server, err = serveKubelet(net.JoinHostPort(opts.IP, strconv.Itoa(opts.KubeletPort)), n); err != nil {
		return fail(err)
	}
	if err := n.register(ctx); err != nil {
		return fail(err)
	}
	factory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), n.synced) {
		return fail(fmt.Errorf("sim node: the Pod informer did not sync: %w", ctx.Err()))
	}
	for _, f := range []func(context.Context){n.runPods, n.runStatuses} {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			f(runCtx)
		}()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		factory.Shutdown()
	}()
	return n, nil
}

// Kubelet is the sim kubelet that runs this node's Pods.
func (n *Node) Kubelet() *kubelet.Kubelet { return n.kubel }

// Name is the Node's name.
func (n *Node) Name() string { return n.opts.Name }

// Stop stops every Pod (their API objects stay: the node is gone, not the
// Pods), the kubelet API and the agent's loops.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	n.work.ShutDown()
	n.statuses.ShutDown()
	n.cancel()
	if n.kubel != nil {
		errs = append(errs, n.kubel.Stop(ctx))
	}
	if n.server != nil {
		errs = append(errs, n.server.Close())
	}
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("sim node: loops still running: %w", ctx.Err()))
	}
	if n.bcast != nil {
		n.bcast.Shutdown()
	}
	return errors.Join(errs...)
}

// register creates the Node and writes its status: Ready, the InternalIP and
// kubelet port the API server calls, and the GPU capacity.
func (n *Node) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	labels := map[string]string{corev1.LabelHostname: n.opts.Name, corev1.LabelOSStable: "linux"}
	if n.opts.GPUProduct != "" {
		labels[LabelGPUProduct] = n.opts.GPUProduct
	}
	node, err := n.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.opts.Name, Labels: labels}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = n.kube.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("sim node: register Node %s: %w", n.opts.Name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		ResourceGPU:           *resource.NewQuantity(n.opts.GPUs, resource.DecimalSI),
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Phase:     corev1.NodeRunning,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.opts.IP}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{
			Port: int32(n.opts.KubeletPort)}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", Message: "sim kubelet is posting ready status",
			LastHeartbeatTime: now, LastTransitionTime: now}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "sim", OperatingSystem: "linux", Architecture: "amd64",
			ContainerRuntimeVersion: "sim://routing-conformance"},
	}
	if _, err := n.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("sim node: status of Node %s: %w", n.opts.Name, err)
	}
	return nil
}
