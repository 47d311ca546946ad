package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

const h20 = "gpustack-nvidia-h20-linux-amd64"

func TestNamespaceNameIsADNSLabelWithPrefixAndSuffix(t *testing.T) {
	for _, tc := range []struct{ prefix, base, suffix, want string }{
		{"rc-", "vllm-router-vllm", "p2", "rc-vllm-router-vllm-abcde-p2"},
		{"rc", "Affinity_Spec", "", "rc-affinity-spec-abcde"},
		{"rc", "", "", "rc-abcde"},
	} {
		if got := namespaceName(tc.prefix, tc.base, "abcde", tc.suffix); got != tc.want {
			t.Errorf("namespaceName(%q,%q,%q) = %q, want %q", tc.prefix, tc.base, tc.suffix, got, tc.want)
		}
	}
	long := namespaceName("rc-", strings.Repeat("x", 100), "abcde", "p12")
	if len(long) > 63 || !strings.HasSuffix(long, "-abcde-p12") {
		t.Errorf("long name %q (%d chars)", long, len(long))
	}
}

func TestCreateNamespaceCarriesOwnershipLabels(t *testing.T) {
	e := newFakeEnv(t)
	name, err := e.cluster.CreateNamespace(context.Background(), "affinity")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := e.kube.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels[LabelManagedBy] != ManagedByValue || ns.Labels[LabelRunID] != "run1" {
		t.Errorf("labels %v", ns.Labels)
	}
}

func TestDeleteNamespaceRefusesOneWithoutTheSuitesLabels(t *testing.T) {
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}
	otherRun := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rc-old", Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelRunID: "run0"}}}
	e := newFakeEnv(t, foreign, otherRun)
	for _, name := range []string{"prod", "rc-old"} {
		err := e.cluster.DeleteNamespace(context.Background(), name)
		if err == nil || !strings.Contains(err.Error(), "refusing to delete namespace "+name) {
			t.Errorf("DeleteNamespace(%s) = %v, want a refusal", name, err)
		}
		if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s was deleted: %v", name, err)
		}
	}
}

func TestDeleteNamespaceRemovesOwnAndWaitsUntilGone(t *testing.T) {
	e := newFakeEnv(t)
	name, err := e.cluster.CreateNamespace(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.DeleteNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace still there: %v", err)
	}
	if err := e.cluster.DeleteNamespace(context.Background(), name); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

func TestDeleteRunNamespacesOnlyTouchesThisRun(t *testing.T) {
	mine := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rc-a", Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelRunID: "run1"}}}
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rc-b", Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelRunID: "run0"}}}
	e := newFakeEnv(t, mine, other)
	if err := e.cluster.DeleteRunNamespaces(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), "rc-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("rc-a survived: %v", err)
	}
	if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), "rc-b", metav1.GetOptions{}); err != nil {
		t.Errorf("rc-b (another run) was touched: %v", err)
	}
}

func TestEnsureLocalQueueUsesTheEntranceName(t *testing.T) {
	e := newFakeEnv(t)
	it := InstanceType{Name: h20, Entrance: "gpustack-fnv64-0123456789abcdef"}
	if err := e.cluster.EnsureLocalQueue(context.Background(), "ns1", it); err != nil {
		t.Fatal(err)
	}
	lq, err := e.dyn.Resource(gvrLocalQueue("v1beta2")).Namespace("ns1").Get(context.Background(), it.Entrance, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("LocalQueue %s: %v", it.Entrance, err)
	}
	if cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue"); cq != h20 {
		t.Errorf("spec.clusterQueue %q, want the InstanceType name %q", cq, h20)
	}
	if lq.GetLabels()[LabelRunID] != "run1" {
		t.Errorf("LocalQueue labels %v", lq.GetLabels())
	}
	// Without an entrance (older operators) the queue carries the InstanceType name.
	if err := e.cluster.EnsureLocalQueue(context.Background(), "ns2", InstanceType{Name: h20}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(gvrLocalQueue("v1beta2")).Namespace("ns2").Get(context.Background(), h20, metav1.GetOptions{}); err != nil {
		t.Errorf("fallback LocalQueue: %v", err)
	}
}

func TestEnsureLocalQueueKeepsTheOperatorsOwn(t *testing.T) {
	existing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "gpustack-fnv64-1", "namespace": "ns1", "labels": map[string]any{"owner": "operator"}},
		"spec":     map[string]any{"clusterQueue": h20},
	}}
	e := newFakeEnv(t, existing)
	if err := e.cluster.EnsureLocalQueue(context.Background(), "ns1", InstanceType{Name: h20, Entrance: "gpustack-fnv64-1"}); err != nil {
		t.Fatal(err)
	}
	for _, a := range e.dyn.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "localqueues" {
			t.Errorf("created a LocalQueue although the operator's exists")
		}
	}
}

func TestCapacityPicksTheActiveInstanceTypeWithMostFree(t *testing.T) {
	e := newFakeEnv(t,
		instanceTypeObj("a-small", PhaseActive, true, "1", "q-a"),
		instanceTypeObj("b-big", PhaseActive, true, "4", "q-b"),
		instanceTypeObj("c-inactive", "Inactive", true, "8", "q-c"),
		instanceTypeObj("d-cpu", PhaseActive, false, "0", "q-d"))
	it, err := e.cluster.Capacity(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if it.Name != "b-big" || it.Remaining != 4 || it.Entrance != "q-b" {
		t.Errorf("picked %+v", it)
	}
	_, err = e.cluster.Capacity(context.Background(), 5)
	var ce *CapacityError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "needs 5 free accelerators") || !strings.Contains(ce.Reason, "4 on b-big") {
		t.Errorf("Capacity(5) = %v", err)
	}
}

func TestCapacityReasonsWhenNothingFits(t *testing.T) {
	e := newFakeEnv(t)
	_, err := e.cluster.Capacity(context.Background(), 1)
	if err == nil || !strings.Contains(err.Error(), "no InstanceType exists") {
		t.Errorf("empty cluster: %v", err)
	}
	e2 := newFakeEnv(t, instanceTypeObj("cpu", PhaseActive, false, "0", ""))
	_, err = e2.cluster.Capacity(context.Background(), 1)
	if err == nil || !strings.Contains(err.Error(), "no Active accelerated InstanceType") || !strings.Contains(err.Error(), "cpu (phase Active, acceleratable false") {
		t.Errorf("CPU-only cluster: %v", err)
	}
}

func TestCanRunGivesTheSkipReason(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "1", "q"))
	ok, reason, err := e.cluster.CanRun(context.Background(), twoServerMD("md"))
	if err != nil || ok || !strings.Contains(reason, "needs 2 free accelerators") {
		t.Errorf("CanRun = %v %q %v", ok, reason, err)
	}
	one := twoServerMD("md")
	one.Spec.Roles[0].Replicas = api.Ptr(int32(1))
	if ok, reason, err := e.cluster.CanRun(context.Background(), one); !ok || err != nil {
		t.Errorf("one replica: %v %q %v", ok, reason, err)
	}
	pinned := twoServerMD("md")
	pinned.Spec.Roles[0].InstanceType = "missing"
	if ok, reason, _ := e.cluster.CanRun(context.Background(), pinned); ok || !strings.Contains(reason, `"missing" does not exist`) {
		t.Errorf("pinned to a missing type: %v %q", ok, reason)
	}
}

func TestDeployCreatesNamespaceLocalQueueAndObject(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "gpustack-fnv64-aa"))
	dep, err := e.cluster.Deploy(context.Background(), twoServerMD("vllm-router-vllm"))
	if err != nil {
		t.Fatal(err)
	}
	ns := dep.Namespace()
	if !strings.HasPrefix(ns, "rc-vllm-router-vllm-") {
		t.Errorf("namespace %q", ns)
	}
	if _, err := e.dyn.Resource(gvrLocalQueue("v1beta2")).Namespace(ns).Get(context.Background(), "gpustack-fnv64-aa", metav1.GetOptions{}); err != nil {
		t.Errorf("LocalQueue: %v", err)
	}
	u, err := e.dyn.Resource(gvrModelDeployment).Namespace(ns).Get(context.Background(), "vllm-router-vllm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "worker.gpustack.ai/v1alpha1" || u.GetKind() != "ModelDeployment" {
		t.Errorf("apiVersion/kind %s %s", u.GetAPIVersion(), u.GetKind())
	}
	roles, _, _ := unstructured.NestedSlice(u.Object, "spec", "roles")
	if it := roles[0].(map[string]any)["instanceType"]; it != h20 {
		t.Errorf("roles[0].instanceType = %v, want %s", it, h20)
	}
	if u.GetLabels()[LabelRunID] != "run1" {
		t.Errorf("object labels %v", u.GetLabels())
	}
	if _, has := u.Object["status"]; has {
		t.Error("status was sent on create")
	}
	if err := dep.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s survived Delete: %v", ns, err)
	}
}

func TestDeployWithoutCapacityStillReachesTheWebhook(t *testing.T) {
	// A CPU-only cluster: admission specs must still get the webhook's answer.
	e := newFakeEnv(t, instanceTypeObj("cpu-only", PhaseActive, false, "0", "q"), instanceTypeObj(h20, "Inactive", true, "0", "q2"))
	dep, err := e.cluster.Deploy(context.Background(), twoServerMD("md"))
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := dep.Object(context.Background())
	if obj.Spec.Roles[0].InstanceType != "cpu-only" {
		t.Errorf("instanceType %q, want the Active one", obj.Spec.Roles[0].InstanceType)
	}
}

// Placing roles, choosing among InstanceTypes and finding their LocalQueue
// names all read one listing, also on the no-capacity fallback.
func TestDeployListsInstanceTypesOnce(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj("cpu-only", PhaseActive, false, "0", "q"))
	if _, err := e.cluster.Deploy(context.Background(), twoServerMD("md")); err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, a := range e.dyn.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "instancetypes" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("Deploy listed instancetypes %d times, want 1", lists)
	}
}

func TestDeployMapsAWebhookRefusalToAdmissionError(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	msg := `"--port" is set by the operator for router "vllm-router" and must not be supplied here, because two values for it cannot be told apart`
	e.dyn.PrependReactor("create", api.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, webhookDenial("spec.router.extraArgs[0]", msg)
	})
	md := twoServerMD("bad")
	md.Spec.Router.ExtraArgs = []string{"--port=1"}
	_, err := e.cluster.Deploy(context.Background(), md)
	var ae *clusters.AdmissionError
	if !errors.As(err, &ae) {
		t.Fatalf("want *clusters.AdmissionError, got %T %v", err, err)
	}
	if ae.Field != "spec.router.extraArgs[0]" || !strings.Contains(ae.Message, msg) {
		t.Errorf("AdmissionError{Field: %q, Message: %q}", ae.Field, ae.Message)
	}
	nss, _ := e.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if len(nss.Items) != 0 {
		t.Errorf("the refused deploy left namespace %s behind", nss.Items[0].Name)
	}
}

func TestAdmissionErrorMapping(t *testing.T) {
	gr := schema.GroupResource{Group: api.Group, Resource: api.Resource}
	for _, tc := range []struct {
		name      string
		err       error
		admission bool
		field     string
	}{
		{"webhook field error", webhookDenial("spec.router.name", "field is immutable"), true, "spec.router.name"},
		{"webhook denial without causes", apierrors.NewForbidden(gr, "x", errors.New(`admission webhook "v" denied the request: router "vllm-router" does not front engine "SGLang"`)), true, ""},
		{"schema", apierrors.NewInvalid(schema.GroupKind{Group: api.Group, Kind: api.Kind}, "x", nil), true, ""},
		{"webhook down", apierrors.NewInternalError(errors.New(`failed calling webhook "v": connection refused`)), false, ""},
		{"rbac", apierrors.NewForbidden(gr, "x", errors.New(`User "u" cannot create resource "modeldeployments"`)), false, ""},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("modified")), false, ""},
		{"plain", errors.New("boom"), false, ""},
	} {
		got := asAdmissionError(tc.err)
		var ae *clusters.AdmissionError
		if errors.As(got, &ae) != tc.admission {
			t.Errorf("%s: admission = %v, want %v (%v)", tc.name, !tc.admission, tc.admission, got)
			continue
		}
		if tc.admission && ae.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.name, ae.Field, tc.field)
		}
		if !tc.admission && got != tc.err {
			t.Errorf("%s: error was rewritten: %v", tc.name, got)
		}
	}
}

func TestDeleteNamespaceWaitsWhileItTerminates(t *testing.T) {
	e := newFakeEnv(t)
	name, _ := e.cluster.CreateNamespace(context.Background(), "x")
	gvr := corev1.SchemeGroupVersion.WithResource("namespaces")
	// The namespace controller: Terminating first, gone a little later.
	e.kube.PrependReactor("delete", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		obj, _ := e.kube.Tracker().Get(gvr, "", name) // not the clientset: its lock is held here
		ns := obj.(*corev1.Namespace).DeepCopy()
		ns.Status.Phase = corev1.NamespaceTerminating
		_ = e.kube.Tracker().Update(gvr, ns, "")
		go func() {
			time.Sleep(50 * time.Millisecond)
			_ = e.kube.Tracker().Delete(gvr, "", name)
		}()
		return true, nil, nil
	})
	start := time.Now()
	if err := e.cluster.DeleteNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Error("DeleteNamespace returned while the namespace was still Terminating")
	}
}

func TestDeleteNamespaceTimesOutNamingTheState(t *testing.T) {
	e := newFakeEnv(t)
	name, _ := e.cluster.CreateNamespace(context.Background(), "x")
	gvr := corev1.SchemeGroupVersion.WithResource("namespaces")
	e.kube.PrependReactor("delete", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		obj, _ := e.kube.Tracker().Get(gvr, "", name) // not the clientset: its lock is held here
		ns := obj.(*corev1.Namespace).DeepCopy()
		ns.Status.Phase = corev1.NamespaceTerminating
		_ = e.kube.Tracker().Update(gvr, ns, "")
		return true, nil, nil // a finalizer that never clears
	})
	e.cluster.iv.Delete = 40 * time.Millisecond
	err := e.cluster.DeleteNamespace(context.Background(), name)
	if err == nil || !strings.Contains(err.Error(), "namespace "+name+" is Terminating") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DeleteNamespace = %v", err)
	}
}
