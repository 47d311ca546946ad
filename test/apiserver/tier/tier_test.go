// Package tier holds the apiserver tier's tests of the installed API: the
// operator's CRD schema and the sim operator's webhooks as a real API server
// enforces them, and the kube target against that server.
package tier

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/kube"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/sim/apiserver/webhook"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/test/apiserver/harness"
	"github.com/gpustack/routing-conformance/test/apiserver/install"
	"github.com/gpustack/routing-conformance/test/apiserver/netns"
)

func TestMain(m *testing.M) { netns.Main(m) }

var (
	gvrModelDeployment = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: api.Resource}
	gvrLocalQueue      = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
)

// fastIntervals keep the kube target's polls short against a local server.
var fastIntervals = kube.Intervals{Poll: 100 * time.Millisecond, Delete: time.Minute, Request: 10 * time.Second}

// One control plane with the operator's API installed and the sim operator's
// webhooks registered serves every subtest, in order.
func TestInstalledAPI(t *testing.T) {
	c := harness.Start(t, harness.Options{})
	ctx := t.Context()
	if _, err := install.All(ctx, c.Config); err != nil {
		t.Fatalf("install: %v", err)
	}
	wh, err := webhook.Serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := wh.Close(); err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	if err := webhook.Register(ctx, c.Config, wh, "default"); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(c.Config)
	kc := kubernetes.NewForConfigOrDie(c.Config)
	mds := dyn.Resource(gvrModelDeployment).Namespace("default")

	t.Run("discovery serves the operator's and Kueue's resources", func(t *testing.T) {
		list, err := kc.Discovery().ServerResourcesForGroupVersion(api.APIVersion)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]metav1.APIResource{}
		for _, r := range list.APIResources {
			got[r.Name] = r
		}
		md := got[api.Resource]
		if !md.Namespaced || md.Kind != api.Kind || strings.Join(md.ShortNames, ",") != "md" {
			t.Errorf("modeldeployments: %+v", md)
		}
		if _, ok := got[api.Resource+"/status"]; !ok {
			t.Error("modeldeployments/status subresource not served")
		}
		if it, ok := got["instancetypes"]; !ok || it.Namespaced {
			t.Errorf("instancetypes: %+v (served %t), want cluster-scoped", it, ok)
		}
		lq, err := kc.Discovery().ServerResourcesForGroupVersion("kueue.x-k8s.io/v1beta2")
		if err != nil || len(lq.APIResources) == 0 || lq.APIResources[0].Name != "localqueues" {
			t.Errorf("kueue.x-k8s.io/v1beta2: %+v, %v", lq, err)
		}
	})

	t.Run("the API server itself refuses an engine name outside the schema", func(t *testing.T) {
		bad := webhook.Probe("schema-refused", config.SimInstanceType)
		unstructured.SetNestedField(bad.Object, "vllm", "spec", "engine", "name")
		_, err := mds.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create with engine.name vllm: %v, want 422 Invalid", err)
		}
		msg := err.Error()
		t.Logf("API server: %s", msg)
		for _, want := range []string{`spec.engine.name: Unsupported value: "vllm"`, `"vLLM"`, `"SGLang"`} {
			if !strings.Contains(msg, want) {
				t.Errorf("refusal %q does not contain %q", msg, want)
			}
		}
		if strings.Contains(msg, "admission webhook") {
			t.Errorf("a schema refusal must come before any webhook: %q", msg)
		}
	})

	t.Run("the webhook's refusal of --port arrives wrapped by the API server", func(t *testing.T) {
		for _, args := range [][]string{{"--port", "9000"}, {"--port=9000"}} {
			_, err := mds.Create(ctx, webhook.Probe("port-refused", config.SimInstanceType, args...), metav1.CreateOptions{})
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				t.Fatalf("create with router extraArgs %q: %v, want a refusal", args, err)
			}
			want := fmt.Sprintf("admission webhook %q denied the request: ", webhook.ValidatingWebhookName)
			msg := st.Status().Message
			t.Logf("API server: %s", msg)
			if !strings.HasPrefix(msg, want) || !strings.Contains(msg, operator.RouterRefusal("--port", api.RouterVLLM)) {
				t.Errorf("extraArgs %q: message %q, want %q then the sim operator's refusal", args, msg, want)
			}
			if st.Status().Code != http.StatusUnprocessableEntity {
				t.Errorf("extraArgs %q: code %d, want 422", args, st.Status().Code)
			}
		}
	})

	t.Run("a valid ModelDeployment is admitted with the schema's and the webhook's defaults", func(t *testing.T) {
		got, err := mds.Create(ctx, webhook.Probe("admitted", config.SimInstanceType, "--policy", "round_robin"), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		t.Cleanup(func() { mds.Delete(context.WithoutCancel(ctx), "admitted", metav1.DeleteOptions{}) })
		role := firstRole(t, got)
		if role["kind"] != api.RoleKindServer || role["size"] != int64(1) {
			t.Errorf("schema defaults not applied: %v", role)
		}
		if acc := webhook.RoleAccelerator(got, 0); acc != operator.DefaultAccelerator {
			t.Errorf("resources.accelerator = %q, want the mutating webhook's %q", acc, operator.DefaultAccelerator)
		}
		if _, set := role["terminationGracePeriodSeconds"]; set {
			t.Errorf("terminationGracePeriodSeconds was defaulted; the operator's schema has no default for it: %v", role)
		}

		// An edit of router extraArgs is admitted; a router rename is refused.
		unstructured.SetNestedStringSlice(got.Object, []string{"--policy", "random"}, "spec", "router", "extraArgs")
		got, err = mds.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update extraArgs: %v", err)
		}
		unstructured.SetNestedField(got.Object, api.RouterLLMD, "spec", "router", "name")
		_, err = mds.Update(ctx, got, metav1.UpdateOptions{})
		if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "spec.router.name") || !strings.Contains(err.Error(), "field is immutable") {
			t.Errorf("router rename: %v, want the webhook's spec.router.name field is immutable", err)
		}
	})

	t.Run("status is written through its subresource and pruned to the schema", func(t *testing.T) {
		md, err := mds.Create(ctx, webhook.Probe("with-status", config.SimInstanceType), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mds.Delete(context.WithoutCancel(ctx), "with-status", metav1.DeleteOptions{}) })
		md.Object["status"] = map[string]any{"phase": "Ready", "roleSummary": "1R2S", "observedGeneration": int64(1)}
		got, err := mds.UpdateStatus(ctx, md, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status, _, _ := unstructured.NestedMap(got.Object, "status")
		if status["phase"] != "Ready" || status["roleSummary"] != "1R2S" {
			t.Errorf("status after UpdateStatus: %v", status)
		}
		// The operator's API has no status.observedGeneration (only
		// conditions carry one), so a real API server drops it: readiness
		// code cannot rely on it on a kube target.
		if _, kept := status["observedGeneration"]; kept {
			t.Errorf("status.observedGeneration survived pruning: %v", status)
		}
	})

	t.Run("the kube target's preflight, capacity and LocalQueue accept the installed API", func(t *testing.T) {
		k := newKube(t, c)
		if err := k.Preflight(ctx); err != nil {
			t.Fatalf("preflight: %v", err)
		}
		it, err := k.Capacity(ctx, 2)
		if err != nil {
			t.Fatalf("capacity for 2 accelerators: %v", err)
		}
		if it.Name != config.SimInstanceType || it.Remaining != 8 || !strings.HasPrefix(it.Entrance, "gpustack-fnv64-") {
			t.Errorf("capacity picked %+v", it)
		}
		if _, err := k.Capacity(ctx, 9); err == nil {
			t.Error("capacity for 9 accelerators on an 8-accelerator InstanceType did not refuse")
		}
		if err := k.EnsureLocalQueue(ctx, "default", it); err != nil {
			t.Fatalf("LocalQueue: %v", err)
		}
		lq, err := dyn.Resource(gvrLocalQueue).Namespace("default").Get(ctx, it.Entrance, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("LocalQueue %s: %v", it.Entrance, err)
		}
		if cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue"); cq != it.Name {
			t.Errorf("LocalQueue spec.clusterQueue = %q, want %q", cq, it.Name)
		}
	})

	t.Run("the kube target's Deploy returns the API server's refusal and Delete removes its namespace", func(t *testing.T) {
		k := newKube(t, c)
		md := &api.ModelDeployment{
			Metadata: api.ObjectMeta{Name: "refused"},
			Spec: api.ModelDeploymentSpec{
				Model:  api.Model{Name: "Qwen/Qwen2.5-0.5B-Instruct"},
				Engine: api.Engine{Name: api.EngineSGLang, Version: "0.5.18"},
				Router: &api.Router{Name: api.RouterSGLang, ExtraArgs: []string{"--port=9000"}},
				Roles:  []api.Role{{Name: "server", Replicas: api.Ptr[int32](2)}},
			},
		}
		_, err := k.Deploy(ctx, md)
		var ae *clusters.AdmissionError
		if !errors.As(err, &ae) {
			t.Fatalf("deploy with --port: %v, want *clusters.AdmissionError", err)
		}
		t.Logf("kube target: %+v", ae)
		if ae.Field != "spec.router.extraArgs[0]" || !strings.Contains(ae.Message, "denied the request") ||
			!strings.Contains(ae.Message, operator.RouterRefusal("--port", api.RouterSGLang)) {
			t.Errorf("admission error %+v", ae)
		}

		md.Metadata.Name = "admitted-by-kube"
		md.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"}
		d, err := k.Deploy(ctx, md)
		if err != nil {
			t.Fatalf("deploy: %v", err)
		}
		if err := d.Delete(ctx); err != nil {
			t.Fatalf("delete: %v", err)
		}
		left, err := kc.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: kube.LabelRunID + "=" + k.RunID()})
		if err != nil || len(left.Items) > 0 {
			t.Errorf("namespaces of the run left after Delete: %v (%v)", names(left.Items), err)
		}
	})

	// The last two subtests replace the sim's validating webhook.
	reg := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations()

	t.Run("preflight names a missing validating webhook", func(t *testing.T) {
		if err := reg.Delete(ctx, webhook.ValidatingConfigName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err := eventually(ctx, func() error { return newKube(t, c).Preflight(ctx) }, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "ValidatingWebhookConfiguration is missing")
		})
		t.Logf("%v", err)
		if err == nil || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("preflight: %v, want one line naming the missing ValidatingWebhookConfiguration", err)
		}
	})

	t.Run("preflight gives one line, not a hang, when the webhook does not answer", func(t *testing.T) {
		hang, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks TLS
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hang.Close() })
		failure, side := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "unanswered"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:         "unanswered.worker.gpustack.ai",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + hang.Addr().String() + webhook.ValidatePath), CABundle: wh.CABundle},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{api.Group}, APIVersions: []string{api.Version}, Resources: []string{api.Resource}},
				}},
				FailurePolicy: &failure, SideEffects: &side, TimeoutSeconds: ptr.To[int32](1),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}
		if _, err := reg.Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = eventually(ctx, func() error { return newKube(t, c).Preflight(ctx) }, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "is not answering")
		})
		t.Logf("%v", err)
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("preflight: %v, want one line saying the webhook is not answering", err)
		}
		if waited := time.Since(start); waited > 30*time.Second {
			t.Errorf("preflight took %s to report an unanswered webhook", waited)
		}

		// A Deploy through it fails with the API server's reason within the
		// webhook's timeout, and leaves no namespace behind.
		k := newKube(t, c)
		start = time.Now()
		_, err = k.Deploy(ctx, &api.ModelDeployment{
			Metadata: api.ObjectMeta{Name: "timed-out"},
			Spec: api.ModelDeploymentSpec{
				Model:  api.Model{Name: "Qwen/Qwen2.5-0.5B-Instruct"},
				Engine: api.Engine{Name: api.EngineSGLang, Version: "0.5.18"},
				Router: &api.Router{Name: api.RouterSGLang},
				Roles:  []api.Role{{Name: "server", Replicas: api.Ptr[int32](2)}},
			},
		})
		t.Logf("deploy through the unanswered webhook (%s): %v", time.Since(start).Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || strings.Contains(err.Error(), "\n") {
			t.Errorf("deploy through an unanswered webhook: %v, want one line with the API server's reason", err)
		}
		if waited := time.Since(start); waited > 30*time.Second {
			t.Errorf("deploy took %s to fail on an unanswered webhook", waited)
		}
		left, err := kc.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: kube.LabelRunID + "=" + k.RunID()})
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range left.Items {
			if ns.DeletionTimestamp == nil {
				t.Errorf("the failed deploy left namespace %s without deleting it", ns.Name)
			}
		}
	})
}

func newKube(t *testing.T, c *harness.Cluster) *kube.Cluster {
	t.Helper()
	k, err := kube.New(kube.Options{Kubeconfig: c.Kubeconfig, PreflightNamespace: "default", Intervals: fastIntervals, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func firstRole(t *testing.T, md *unstructured.Unstructured) map[string]any {
	t.Helper()
	roles, _, _ := unstructured.NestedSlice(md.Object, "spec", "roles")
	if len(roles) == 0 {
		t.Fatalf("no roles in %v", md.Object["spec"])
	}
	role, _ := roles[0].(map[string]any)
	return role
}

// eventually calls f until done accepts its error or 20 s pass, and returns
// the last error: the API server applies a webhook configuration change a
// moment after it is stored.
func eventually(ctx context.Context, f func() error, done func(error) bool) error {
	var last error
	wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		last = f()
		return done(last), nil
	})
	return last
}

func names(items []corev1.Namespace) []string {
	out := make([]string, 0, len(items))
	for _, ns := range items {
		out = append(out, ns.Name)
	}
	return out
}
