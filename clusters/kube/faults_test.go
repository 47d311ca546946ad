package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpustack/routing-conformance/clusters"
)

func TestFaultsDeleteOnlyTheDeploymentsOwnPods(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	// The reactor goes in before Deploy starts the deployment's Pod
	// informer, which reads the fake's reactor chain from its own goroutine.
	var graces []string
	e.kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.DeleteActionImpl).DeleteOptions
		graces = append(graces, graceWords(opts.GracePeriodSeconds))
		return false, nil, nil
	})
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	e.addPod(enginePod(d.ns, d.name, "md-server-a", "10.0.0.1"))
	e.addPod(enginePod(d.ns, "other", "other-server-a", "10.0.0.2"))
	ctx := context.Background()
	if err := d.KillEnginePod(ctx, clusters.Replica{Name: "md-router-a"}); err == nil || !strings.Contains(err.Error(), "is a router Pod") {
		t.Errorf("killing a router Pod as an engine: %v", err)
	}
	if err := d.KillEnginePod(ctx, clusters.Replica{Name: "other-server-a"}); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Errorf("killing another deployment's Pod: %v", err)
	}
	if err := d.DeleteRouterPod(ctx, "md-server-a"); err == nil || !strings.Contains(err.Error(), "is not a router Pod") {
		t.Errorf("deleting an engine Pod as the router: %v", err)
	}
	if err := d.KillEnginePod(ctx, clusters.Replica{Name: "md-server-a"}); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteRouterPod(ctx, "md-router-a"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(graces, ",") != "0s,the Pod's own" {
		t.Errorf("grace periods %v, want a kill with 0s then a plain delete", graces)
	}
	for _, name := range []string{"md-server-a", "md-router-a"} {
		if _, err := e.kube.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s still there: %v", name, err)
		}
	}
	if _, err := d.InjectHTTPFault(ctx, "md-router-a", clusters.HTTPFault{Port: 8081, Hang: true}); !errors.Is(err, clusters.ErrFaultUnsupported) || !strings.Contains(err.Error(), "chaos tool") {
		t.Errorf("HTTP fault on kube: %v", err)
	}
}
