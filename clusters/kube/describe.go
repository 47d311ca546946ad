package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// Where the router image is configured (docs/operator.md#versions-and-images): the Setting in the
// operator namespace, overridable by the operator's environment, with a
// compiled-in default.
const (
	SettingRouterImage = "model-deployment-router-image"
	EnvRouterImage     = "GPUSTACK_MODEL_DEPLOYMENT_ROUTER_IMAGE"
	DefaultRouterImage = "gpustack/llm-router:v0.1.0"
	// LabelGPUProduct is set on GPU nodes by NVIDIA GPU feature discovery.
	LabelGPUProduct = "nvidia.com/gpu.product"
)

// Describe reports versions, the GPU product, free accelerators per Active
// InstanceType and the router/engine pairs. Parts it cannot read are noted,
// never fatal: the report should still render on a half-readable cluster.
func (c *Cluster) Describe(ctx context.Context) (clusters.Environment, error) {
	env := clusters.Environment{Target: c.opts.Target, Cluster: c.host}
	if c.opts.Context != "" {
		env.Cluster = c.opts.Context + " (" + c.host + ")"
	}
	if v, err := c.disco().ServerVersionWithContext(ctx); err == nil {
		env.KubernetesVersion = v.GitVersion
	} else {
		return env, fmt.Errorf("describe: Kubernetes version: %s", firstLine(err.Error()))
	}

	opImage, opEnv, err := c.operatorImage(ctx)
	if err != nil {
		env.Notes = append(env.Notes, "operator version unknown: "+err.Error())
	} else {
		env.OperatorVersion = imageTag(opImage)
		env.Notes = append(env.Notes, "operator image "+opImage)
	}
	env.RouterImage, err = c.routerImage(ctx, opEnv)
	if err != nil {
		env.Notes = append(env.Notes, err.Error())
	}
	env.EngineImages = c.engineImages()

	if prod, err := c.gpuProducts(ctx); err != nil {
		env.Notes = append(env.Notes, "GPU product unknown: "+err.Error())
	} else {
		env.GPUProduct = prod
	}

	its, err := c.InstanceTypes(ctx)
	if err != nil {
		env.Notes = append(env.Notes, err.Error())
	}
	var bestFree int64
	for _, it := range its {
		if it.Phase != PhaseActive || !it.Acceleratable {
			continue
		}
		if env.Accelerators == nil {
			env.Accelerators = map[string]int64{}
		}
		env.Accelerators[it.Name] = it.Remaining
		if it.Remaining > bestFree {
			bestFree = it.Remaining
		}
		if env.GPUProduct == "" && it.Product != "" {
			env.GPUProduct = it.Product
		}
	}
	noGPU := ""
	if bestFree == 0 {
		noGPU = "no Active accelerated InstanceType has a free accelerator (kubectl get instancetypes)"
	}
	env.Pairs = pairs(noGPU)
	via := "port-forwards to the Ready router Pods' 8081, a Pod drawn at random per connection as the router Service does"
	if c.inCluster {
		via = "the router Service (<md>-router.<ns>.svc:8081)"
	}
	env.Notes = append(env.Notes, "engines and routers run their real images; requests go through "+via,
		fmt.Sprintf("namespaces of this run carry %s=%s", LabelRunID, c.opts.RunID))
	return env, nil
}

// pairs is every router/engine combination, supported when the operator's
// table (api.Matrix) admits it and an accelerator is free.
func pairs(noGPU string) []clusters.PairSupport {
	var out []clusters.PairSupport
	for _, r := range api.Routers {
		for _, e := range api.Engines {
			p := clusters.PairSupport{Pair: api.Pair{Router: r, Engine: e}, Supported: true}
			switch {
			case !api.Fronts(r, e):
				p.Supported = false
				p.Reason = fmt.Sprintf("router %q does not front engine %q; it accepts %s (operator webhook)", r, e, strings.Join(api.EnginesOf(r), ", "))
			case noGPU != "":
				p.Supported = false
				p.Reason = noGPU
			}
			out = append(out, p)
		}
	}
	return out
}

// operatorImage finds the operator's image (and its env) from its Deployment
// in the operator namespace: the container whose image names the operator,
// else the only Deployment there.
func (c *Cluster) operatorImage(ctx context.Context) (string, []corev1.EnvVar, error) {
	list, err := c.kube.AppsV1().Deployments(c.opts.OperatorNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("list Deployments in %s: %s", c.opts.OperatorNamespace, firstLine(err.Error()))
	}
	var fallback *corev1.Container
	for i := range list.Items {
		for j := range list.Items[i].Spec.Template.Spec.Containers {
			ct := &list.Items[i].Spec.Template.Spec.Containers[j]
			if strings.Contains(ct.Image, "gpustack-operator") || strings.Contains(list.Items[i].Name, "gpustack-operator") {
				return ct.Image, ct.Env, nil
			}
			if fallback == nil {
				fallback = ct
			}
		}
	}
	if len(list.Items) == 1 && fallback != nil {
		return fallback.Image, fallback.Env, nil
	}
	return "", nil, fmt.Errorf("no gpustack-operator Deployment in namespace %s", c.opts.OperatorNamespace)
}

func (c *Cluster) routerImage(ctx context.Context, opEnv []corev1.EnvVar) (string, error) {
	u, err := c.dyn.Resource(gvrSetting).Namespace(c.opts.OperatorNamespace).Get(ctx, SettingRouterImage, metav1.GetOptions{})
	if err == nil {
		if v, _, _ := unstructured.NestedString(u.Object, "status", "value"); v != "" {
			return v, nil
		}
	}
	for _, e := range opEnv {
		if e.Name == EnvRouterImage && e.Value != "" {
			return e.Value, nil
		}
	}
	if err != nil {
		return DefaultRouterImage, fmt.Errorf("router image: Setting %s/%s unreadable (%s); reporting the operator default", c.opts.OperatorNamespace, SettingRouterImage, firstLine(err.Error()))
	}
	return DefaultRouterImage, nil
}

// gpuProducts lists the distinct nvidia.com/gpu.product node labels.
func (c *Cluster) gpuProducts(ctx context.Context) (string, error) {
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelGPUProduct})
	if err != nil {
		return "", fmt.Errorf("list nodes: %s", firstLine(err.Error()))
	}
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		if p := n.Labels[LabelGPUProduct]; p != "" {
			seen[p] = true
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(seen)), ", "), nil
}

// imageTag returns the tag of an image reference, else its digest, else "".
func imageTag(image string) string {
	ref, digest, _ := strings.Cut(image, "@")
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[i+1:]
	}
	return digest
}
