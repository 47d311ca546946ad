package kube

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpustack/routing-conformance/api"
)

// assertOneLine checks the preflight contract: one line, naming the problem
// and the fix.
func assertOneLine(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error mentioning %q, got nil", wants)
	}
	msg := err.Error()
	t.Log(msg)
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines:\n%s", msg)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
}

func TestPreflightPassesOnAHealthyCluster(t *testing.T) {
	e := newFakeEnv(t)
	if err := e.cluster.Preflight(context.Background()); err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	// The webhook probe must be a server-side dry run: nothing stored.
	var dry bool
	for _, a := range e.dyn.Actions() {
		if ca, ok := a.(k8stesting.CreateActionImpl); ok && a.GetResource().Resource == api.Resource {
			dry = len(ca.CreateOptions.DryRun) == 1 && ca.CreateOptions.DryRun[0] == "All"
		}
	}
	if !dry {
		t.Error("the webhook probe was not sent with dryRun=All")
	}
	list, _ := e.dyn.Resource(gvrModelDeployment).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Errorf("preflight stored %d ModelDeployments", len(list.Items))
	}
}

func TestPreflightNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := New(Options{})
	assertOneLine(t, err, "no kubeconfig", "E2E_KUBECONFIG", "kube.kubeconfig in e2e.yaml")
	// The suite has no --kubeconfig flag; the advice must not offer one.
	if strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("advises a flag that does not exist: %v", err)
	}
}

func TestPreflightKubeconfigFileMissing(t *testing.T) {
	_, err := New(Options{Kubeconfig: filepath.Join(t.TempDir(), "nope")})
	assertOneLine(t, err, "kubeconfig", "nope", "E2E_KUBECONFIG")
}

func TestPreflightAPIServerUnreachable(t *testing.T) {
	// A real client against a loopback port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://` + addr + `"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Kubeconfig: kc})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// A kubeconfig never sets a rate limit: the client's is the suite's,
	// not client-go's 5 per second.
	if c.restCfg.QPS != ClientQPS || c.restCfg.Burst != ClientBurst {
		t.Errorf("client rate limit %v/%d, want %v/%d", c.restCfg.QPS, c.restCfg.Burst, ClientQPS, ClientBurst)
	}
	err = c.Preflight(context.Background())
	assertOneLine(t, err, "cannot reach the Kubernetes API server", addr, "KUBECONFIG")
}

func TestPreflightNamesEveryMissingPermission(t *testing.T) {
	e := newFakeEnv(t)
	e.allowAll("create namespaces", "get pods/log", "create pods/portforward")
	err := e.cluster.Preflight(context.Background())
	assertOneLine(t, err, "missing RBAC", "create namespaces", "get pods/log", "create pods/portforward", "deploy/rbac")
	if strings.Contains(err.Error(), "list pods") {
		t.Errorf("granted permission reported missing: %v", err)
	}
}

func TestPreflightAccessReviewsForbidden(t *testing.T) {
	e := newFakeEnv(t)
	e.kube.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, "", errors.New("no"))
	})
	assertOneLine(t, e.cluster.Preflight(context.Background()), "missing RBAC", "selfsubjectaccessreviews", "deploy/rbac")
}

func TestPreflightCRDNotServed(t *testing.T) {
	e := newFakeEnv(t)
	e.kube.Resources = servedResources(false, true, "v1beta2")
	assertOneLine(t, e.cluster.Preflight(context.Background()), "ModelDeployment CRD is not served", CRDName, "install gpustack-operator")
}

func TestPreflightCRDInstalledWithoutTheVersion(t *testing.T) {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": CRDName},
		"spec": map[string]any{"versions": []any{
			map[string]any{"name": "v1alpha0", "served": true},
			map[string]any{"name": "v1alpha1", "served": false},
		}},
	}}
	e := newFakeEnv(t, crd)
	e.kube.Resources = servedResources(false, true, "v1beta2")
	assertOneLine(t, e.cluster.Preflight(context.Background()), "is installed but does not serve v1alpha1", "serves v1alpha0", "upgrade gpustack-operator")
}

func TestPreflightInstanceTypesNotServed(t *testing.T) {
	e := newFakeEnv(t)
	e.kube.Resources = servedResources(true, false, "v1beta2")
	assertOneLine(t, e.cluster.Preflight(context.Background()), "instancetypes", "upgrade")
}

func TestPreflightWebhookNotAnswering(t *testing.T) {
	e := newFakeEnv(t)
	e.dyn.PrependReactor("create", api.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New(`Internal error occurred: failed calling webhook "validate.modeldeployment.worker.gpustack.ai": failed to call webhook: Post "https://gpustack-operator-webhook.gpustack-system.svc:443/validate": dial tcp 10.96.0.12:443: connect: connection refused`))
	})
	assertOneLine(t, e.cluster.Preflight(context.Background()), "webhook is not answering", "connection refused", "gpustack-system")
}

func TestPreflightWebhookMissing(t *testing.T) {
	e := newFakeEnv(t)
	e.dyn.ReactionChain = e.dyn.ReactionChain[1:] // drop the fake webhook: the dry run is admitted
	assertOneLine(t, e.cluster.Preflight(context.Background()), "validating webhook did not refuse", "reinstall gpustack-operator")
}

func TestPreflightSchemaRefusesProbe(t *testing.T) {
	e := newFakeEnv(t)
	e.dyn.PrependReactor("create", api.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: api.Group, Kind: api.Kind}, "x", nil)
	})
	assertOneLine(t, e.cluster.Preflight(context.Background()), "CRD schema refused", "upgrade the operator")
}

func TestPreflightKueueNotServed(t *testing.T) {
	e := newFakeEnv(t)
	e.kube.Resources = servedResources(true, true, "")
	assertOneLine(t, e.cluster.Preflight(context.Background()), "LocalQueue", "install Kueue")
}

func TestPreflightFindsKueueV1beta1(t *testing.T) {
	e := newFakeEnv(t)
	e.kube.Resources = servedResources(true, true, "v1beta1")
	if err := e.cluster.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	gvr, _ := e.cluster.localQueueGVR(context.Background())
	if gvr.Version != "v1beta1" {
		t.Errorf("LocalQueue version %s, want v1beta1", gvr.Version)
	}
}

func TestPreflightWebhookWithoutDryRunSupport(t *testing.T) {
	e := newFakeEnv(t)
	e.dyn.PrependReactor("create", api.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewBadRequest(`admission webhook "quota.example.com" does not support dry run`)
	})
	assertOneLine(t, e.cluster.Preflight(context.Background()), "refuses server-side dry runs", "quota.example.com", "sideEffects: None")
}
