package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
)

// DefaultControllers are the controllers Start runs when
// Options.Controllers is empty: namespace finalization and deletion, and
// garbage collection of objects whose owners are gone.
var DefaultControllers = []string{"namespace-controller", "garbage-collector-controller"}

// The settings kube-controller-manager gives these controllers by default
// (k8s.io/kubernetes@v1.37.2: cmd/kube-controller-manager/app/core.go and
// apps.go, pkg/controller/*/config/v1alpha1/defaults.go, and the manager's
// --kube-api-qps 20 / --kube-api-burst 30).
const (
	managerQPS, managerBurst = 20, 30
	namespaceSyncPeriod      = 5 * time.Minute
	concurrentNamespaceSyncs = 10
	concurrentGCSyncs        = 20
	gcSyncPeriod             = 30 * time.Second // GC's discovery resync, as the manager's
	concurrentDeploymentSync = 5
	concurrentRSSyncs        = 5
)

// startControllers runs the named kube-controller-manager controllers
// (names as --controllers takes them) against cfg, each constructed as the
// manager constructs it. They are started directly rather than through the
// manager's test server, which links every controller the manager has and
// made the tier's cold build minutes longer. stop ends them and waits.
func startControllers(cfg *rest.Config, names []string) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var shared informers.SharedInformerFactory
	var metaShared metadatainformer.SharedInformerFactory
	stop = func() {
		cancel()
		wg.Wait()
		if shared != nil {
			shared.Shutdown()
		}
		if metaShared != nil {
			metaShared.Shutdown()
		}
	}
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }

	client, err := clientFor(cfg, 1, 1)
	if err != nil {
		return stop, err
	}
	shared = informers.NewSharedInformerFactory(client, 0)
	var informersStarted chan struct{}
	for _, name := range names {
		switch name {
		case "namespace-controller":
			// The manager raises this client's limits: it makes many
			// discovery and delete calls per namespace.
			nsClient, err := clientFor(cfg, 20, 100)
			if err != nil {
				return stop, err
			}
			nsMeta, err := metadata.NewForConfig(limited(cfg, 20, 100))
			if err != nil {
				return stop, err
			}
			nc := namespace.NewNamespaceController(ctx, nsClient, nsMeta,
				nsClient.Discovery().ServerPreferredNamespacedResources,
				shared.Core().V1().Namespaces(), namespaceSyncPeriod, corev1.FinalizerKubernetes)
			run(func() { nc.Run(ctx, concurrentNamespaceSyncs) })
		case "garbage-collector-controller":
			// Each deletion takes two calls, so the manager doubles the QPS.
			gcCfg := limited(cfg, 2, 1)
			gcMeta, err := metadata.NewForConfig(gcCfg)
			if err != nil {
				return stop, err
			}
			gcClient, err := kubernetes.NewForConfig(gcCfg)
			if err != nil {
				return stop, err
			}
			metaShared = metadatainformer.NewSharedInformerFactory(gcMeta, 0)
			informersStarted = make(chan struct{})
			mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(gcClient.Discovery()))
			gc, err := garbagecollector.NewGarbageCollector(ctx, gcClient, gcMeta, mapper,
				garbagecollector.DefaultIgnoredResources(),
				informerfactory.NewInformerFactory(shared, metaShared), informersStarted)
			if err != nil {
				return stop, fmt.Errorf("garbage collector: %w", err)
			}
			run(func() { gc.Run(ctx, concurrentGCSyncs, gcSyncPeriod) })
			run(func() { gc.Sync(ctx, gcClient.Discovery(), gcSyncPeriod) })
		case "deployment-controller":
			dc, err := deployment.NewDeploymentController(ctx, shared.Apps().V1().Deployments(),
				shared.Apps().V1().ReplicaSets(), shared.Core().V1().Pods(), client)
			if err != nil {
				return stop, fmt.Errorf("deployment controller: %w", err)
			}
			run(func() { dc.Run(ctx, concurrentDeploymentSync) })
		case "replicaset-controller":
			rsc := replicaset.NewReplicaSetController(ctx, shared.Apps().V1().ReplicaSets(),
				shared.Core().V1().Pods(), client, replicaset.BurstReplicas)
			run(func() { rsc.Run(ctx, concurrentRSSyncs) })
		default:
			return stop, fmt.Errorf("controller %q: the harness runs only %s", name,
				"namespace-controller, garbage-collector-controller, deployment-controller, replicaset-controller")
		}
	}
	shared.Start(ctx.Done())
	if metaShared != nil {
		metaShared.Start(ctx.Done())
	}
	if informersStarted != nil {
		close(informersStarted)
	}
	return stop, nil
}

// limited is cfg with the manager's client limits times the given factors.
func limited(cfg *rest.Config, qps, burst int) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = float32(managerQPS*qps), managerBurst*burst
	return c
}

func clientFor(cfg *rest.Config, qps, burst int) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(limited(cfg, qps, burst))
}
