package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// Access is one permission the suite needs. Namespace "" means in every
// namespace (the suite creates its own); OperatorNS means the operator's.
type Access struct {
	Group       string
	Resource    string
	Subresource string
	Verb        string
	// OperatorNS: the permission is only needed in Options.OperatorNamespace.
	OperatorNS bool
}

func (a Access) String() string {
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Group != "" {
		r += "." + a.Group
	}
	s := a.Verb + " " + r
	if a.OperatorNS {
		s += " (operator namespace)"
	}
	return s
}

// RequiredAccess is every permission the suite uses; Preflight checks each one
// with a SelfSubjectAccessReview and deploy/rbac/ grants exactly these (a test
// keeps the two in step).
var RequiredAccess = []Access{
	{Resource: "namespaces", Verb: "create"},
	{Resource: "namespaces", Verb: "delete"},
	{Resource: "namespaces", Verb: "get"},
	{Resource: "namespaces", Verb: "list"},
	{Group: kueueGroup, Resource: "localqueues", Verb: "create"},
	{Group: kueueGroup, Resource: "localqueues", Verb: "get"},
	{Group: api.Group, Resource: api.Resource, Verb: "create"},
	{Group: api.Group, Resource: api.Resource, Verb: "get"},
	{Group: api.Group, Resource: api.Resource, Verb: "patch"},
	{Group: api.Group, Resource: api.Resource, Verb: "delete"},
	{Group: api.Group, Resource: api.Resource, Subresource: "status", Verb: "get"},
	{Resource: "pods", Verb: "get"},
	{Resource: "pods", Verb: "list"},
	{Resource: "pods", Verb: "watch"},
	{Resource: "pods", Verb: "delete"}, // the resilience claims' faults (KillEnginePod, DeleteRouterPod)
	{Resource: "pods", Subresource: "log", Verb: "get"},
	{Resource: "pods", Subresource: "proxy", Verb: "get"},
	{Resource: "pods", Subresource: "portforward", Verb: "create"},
	{Resource: "configmaps", Verb: "get"},
	{Resource: "events", Verb: "list"},
	{Group: api.Group, Resource: "instancetypes", Verb: "get"},
	{Group: api.Group, Resource: "instancetypes", Verb: "list"},
	{Resource: "nodes", Verb: "list"},
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "get"},
	{Group: "gpustack.ai", Resource: "settings", Verb: "get", OperatorNS: true},
	{Group: "apps", Resource: "deployments", Verb: "list", OperatorNS: true},
}

// Preflight checks, in order, everything a spec needs from the cluster and
// returns the first problem as one line that names what is missing and how to
// fix it: API server reachable, RBAC (all missing permissions in one line),
// the ModelDeployment CRD served, the operator's webhooks answering, Kueue's
// LocalQueue served. Missing accelerator capacity is not an error here: specs
// skip with the reason from Capacity.
func (c *Cluster) Preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*c.iv.Request)
	defer cancel()
	for _, step := range []func(context.Context) error{
		c.checkReachable,
		c.checkRBAC,
		c.checkCRD,
		c.checkWebhooks,
		c.checkKueue,
	} {
		if err := step(ctx); err != nil {
			return fmt.Errorf("preflight: %w", err)
		}
	}
	return nil
}

func (c *Cluster) checkReachable(ctx context.Context) error {
	v, err := c.disco().ServerVersionWithContext(ctx)
	if err != nil {
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %s; check KUBECONFIG and its current context, the VPN, and that the cluster is up (kubectl get --raw /version)", c.host, firstLine(err.Error()))
	}
	c.logf("kube: API server %s, Kubernetes %s", c.host, v.GitVersion)
	return nil
}

func (c *Cluster) checkRBAC(ctx context.Context) error {
	var missing []string
	for _, a := range RequiredAccess {
		ns := ""
		if a.OperatorNS {
			ns = c.opts.OperatorNamespace
		}
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource,
			},
		}}
		got, err := c.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsForbidden(err) {
				return fmt.Errorf("missing RBAC: create selfsubjectaccessreviews.authorization.k8s.io (needed to check the rest); apply deploy/rbac/ (kubectl apply -k deploy/rbac) or ask a cluster admin")
			}
			return fmt.Errorf("access review for %s: %s", a, firstLine(err.Error()))
		}
		if !got.Status.Allowed {
			missing = append(missing, a.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing RBAC: %s; apply deploy/rbac/ (kubectl apply -k deploy/rbac) and bind it to this user or service account, or ask a cluster admin", strings.Join(missing, ", "))
	}
	return nil
}

func (c *Cluster) checkCRD(ctx context.Context) error {
	gv := api.Group + "/" + api.Version
	list, err := c.disco().ServerResourcesForGroupVersionWithContext(ctx, gv)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("discovery of %s: %s", gv, firstLine(err.Error()))
	}
	has := map[string]bool{}
	if list != nil {
		for _, r := range list.APIResources {
			has[r.Name] = true
		}
	}
	if !has[api.Resource] {
		// Tell "not installed" from "installed without the version we write".
		crd, gerr := c.dyn.Resource(gvrCRD).Get(ctx, CRDName, metav1.GetOptions{})
		if gerr == nil {
			served := crdServedVersions(crd)
			return fmt.Errorf("the ModelDeployment CRD %s is installed but does not serve %s (it serves %s): upgrade gpustack-operator", CRDName, api.Version, strings.Join(served, ", "))
		}
		return fmt.Errorf("the ModelDeployment CRD is not served (%s %s missing from discovery): install gpustack-operator, e.g. helm install gpustack-operator <chart> -n %s --create-namespace", CRDName, api.Version, c.opts.OperatorNamespace)
	}
	if !has["instancetypes"] {
		return fmt.Errorf("instancetypes.%s %s is not served: the installed gpustack-operator is too old for this suite; upgrade it", api.Group, api.Version)
	}
	return nil
}

// checkWebhooks sends a server-side dry-run create of an object the
// operator's validating webhook refuses (vllm-router in front of SGLang,
// GO webhook modelDeploymentRouterEngines) but the CRD schema accepts: a
// refusal proves the webhook answered; nothing is stored either way.
func (c *Cluster) checkWebhooks(ctx context.Context) error {
	probe := &api.ModelDeployment{
		Metadata: api.ObjectMeta{Name: "rc-preflight-" + randomSuffix(5), Namespace: c.opts.PreflightNamespace},
		Spec: api.ModelDeploymentSpec{
			Model:  api.Model{Name: "preflight"},
			Engine: api.Engine{Name: api.EngineSGLang, Version: "0.5.18"},
			Router: &api.Router{Name: api.RouterVLLM},
			Roles:  []api.Role{{Name: "server", InstanceType: "rc-preflight"}},
		},
	}
	u, err := toUnstructured(probe)
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(gvrModelDeployment).Namespace(probe.Metadata.Namespace).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return fmt.Errorf("the operator's validating webhook did not refuse a ModelDeployment that puts vllm-router in front of SGLang (server-side dry run in namespace %s): its ValidatingWebhookConfiguration is missing; reinstall gpustack-operator", c.opts.PreflightNamespace)
	case webhookUnreachable(err):
		return fmt.Errorf("the operator's admission webhook is not answering: %s; check the operator Pods in %s (kubectl -n %s get pods) and its webhook Service endpoints", firstLine(err.Error()), c.opts.OperatorNamespace, c.opts.OperatorNamespace)
	case strings.Contains(err.Error(), "does not support dry run"):
		return fmt.Errorf("an admission webhook refuses server-side dry runs (%s), so the preflight cannot probe the operator's webhook without creating objects; set sideEffects: None on that webhook or report it", firstLine(err.Error()))
	case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "namespaces"):
		return fmt.Errorf("preflight namespace %q does not exist; set the preflight namespace option to an existing namespace", c.opts.PreflightNamespace)
	}
	var ae *clusters.AdmissionError
	if errors.As(asAdmissionError(err), &ae) {
		if !strings.Contains(ae.Message, "denied the request") {
			// The CRD schema refused it before any webhook saw it: the suite's
			// object shape does not match the installed operator's API.
			return fmt.Errorf("the ModelDeployment CRD schema refused the suite's preflight object before the webhook saw it (%s); the installed gpustack-operator's API differs from the one this suite targets (engine vLLM|SGLang, router names of docs/operator.md#spec-fields): upgrade the operator", firstLine(ae.Message))
		}
		c.logf("kube: webhook answered the preflight probe: %s", firstLine(ae.Message))
		return nil
	}
	return fmt.Errorf("dry-run create of a ModelDeployment: %s", firstLine(err.Error()))
}

func (c *Cluster) checkKueue(ctx context.Context) error {
	_, err := c.localQueueGVR(ctx)
	return err
}

// localQueueGVR finds the served LocalQueue version once.
func (c *Cluster) localQueueGVR(ctx context.Context) (schema.GroupVersionResource, error) {
	c.mu.Lock()
	gv := c.kueueGV
	c.mu.Unlock()
	if gv != "" {
		return gvrLocalQueue(gv), nil
	}
	for _, v := range kueueVersions {
		list, err := c.disco().ServerResourcesForGroupVersionWithContext(ctx, kueueGroup+"/"+v)
		if err != nil || list == nil {
			continue
		}
		for _, r := range list.APIResources {
			if r.Name == "localqueues" {
				c.mu.Lock()
				c.kueueGV = v
				c.mu.Unlock()
				return gvrLocalQueue(v), nil
			}
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("Kueue's LocalQueue API (%s %s) is not served: the operator admits ModelDeployment Pods through Kueue; install Kueue (the operator chart's dependency) before running the suite", kueueGroup, strings.Join(kueueVersions, " or "))
}

func crdServedVersions(crd *unstructured.Unstructured) []string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var out []string
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			name, _ := m["name"].(string)
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		out = []string{"no version"}
	}
	return out
}
