package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gpustack/routing-conformance/api"
)

// Names Register gives the configurations and their webhooks. The webhook
// names follow the operator's generated form
// (<validate|mutate>.<group>.<version>.<kind>); the configurations say they
// are the sim's.
const (
	ValidatingConfigName  = "sim-gpustack-operator-validation"
	MutatingConfigName    = "sim-gpustack-operator-mutation"
	ValidatingWebhookName = "validate.worker.gpustack.ai.v1alpha1.modeldeployment"
	MutatingWebhookName   = "mutate.worker.gpustack.ai.v1alpha1.modeldeployment"
)

// probeInstanceType is the InstanceType of waitActive's dry runs. They store
// nothing and the sim's admission takes any name as an accelerated type
// (sim/operator's defaults), so the probe needs no installed InstanceType.
const probeInstanceType = "webhook-probe"

// activeTimeout bounds the wait for the API server to start calling newly
// registered webhooks (its configuration informer picks them up).
const activeTimeout = 30 * time.Second

var gvrModelDeployment = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: api.Resource}

// Register creates a MutatingWebhookConfiguration and a
// ValidatingWebhookConfiguration for modeldeployments CREATE and UPDATE that
// call s, then waits until the API server calls both: a server-side dry-run
// create in namespace probeNS is refused by the validating webhook and
// defaulted by the mutating one. Nothing is stored.
func Register(ctx context.Context, cfg *rest.Config, s *Server, probeNS string) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{api.Group},
			APIVersions: []string{api.Version},
			Resources:   []string{api.Resource},
			Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(s.URL + path), CABundle: s.CABundle}
	}
	failure := admissionregistrationv1.Fail
	match := admissionregistrationv1.Equivalent
	side := admissionregistrationv1.SideEffectClassNone

	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: MutatingConfigName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: MutatingWebhookName, ClientConfig: client(MutatePath), Rules: rules,
			FailurePolicy: &failure, MatchPolicy: &match, SideEffects: &side,
			TimeoutSeconds: ptr.To[int32](10), AdmissionReviewVersions: []string{"v1"},
		}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingConfigName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: ValidatingWebhookName, ClientConfig: client(ValidatePath), Rules: rules,
			FailurePolicy: &failure, MatchPolicy: &match, SideEffects: &side,
			TimeoutSeconds: ptr.To[int32](10), AdmissionReviewVersions: []string{"v1"},
		}},
	}
	reg := kube.AdmissionregistrationV1()
	if _, err := reg.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", mwc.Name, err)
	}
	if _, err := reg.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	return waitActive(ctx, cfg, probeNS)
}

// waitActive polls server-side dry runs until both webhooks answer.
func waitActive(ctx context.Context, cfg *rest.Config, ns string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	res := dyn.Resource(gvrModelDeployment).Namespace(ns)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, activeTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := res.Create(ctx, Probe("webhook-probe-refused", probeInstanceType, "--port=1"), dryRun)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", ValidatingWebhookName)) {
			last = fmt.Errorf("validating webhook not called yet: %v", err)
			return false, nil
		}
		got, err := res.Create(ctx, Probe("webhook-probe-defaulted", probeInstanceType), dryRun)
		if err != nil {
			last = fmt.Errorf("dry run of a valid ModelDeployment: %w", err)
			return false, nil
		}
		if RoleAccelerator(got, 0) == "" {
			last = errors.New("mutating webhook not called yet: spec.roles[0].resources.accelerator not defaulted")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not start calling the sim operator's webhooks within %s: %v", activeTimeout, last)
	}
	return nil
}

// Probe is a ModelDeployment the schema admits: one vLLM server role behind
// vllm-router on instanceType, with routerArgs as spec.router.extraArgs and no
// accelerator count.
func Probe(name, instanceType string, routerArgs ...string) *unstructured.Unstructured {
	args := make([]any, 0, len(routerArgs))
	for _, a := range routerArgs {
		args = append(args, a)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.APIVersion,
		"kind":       api.Kind,
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"model":  map[string]any{"name": "Qwen/Qwen2.5-0.5B-Instruct"},
			"engine": map[string]any{"name": api.EngineVLLM, "version": "0.29.0"},
			"router": map[string]any{"name": api.RouterVLLM, "extraArgs": args},
			"roles": []any{map[string]any{
				"name": "server", "replicas": int64(2), "instanceType": instanceType,
			}},
		},
	}}
}

// RoleAccelerator is spec.roles[i].resources.accelerator of a stored
// ModelDeployment, or "" when absent.
func RoleAccelerator(md *unstructured.Unstructured, i int) string {
	roles, _, _ := unstructured.NestedSlice(md.Object, "spec", "roles")
	if i >= len(roles) {
		return ""
	}
	role, _ := roles[i].(map[string]any)
	res, _ := role["resources"].(map[string]any)
	accel, _ := res["accelerator"].(string)
	return accel
}
