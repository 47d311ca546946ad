// Package install puts on an API server what gpustack-operator and Kueue would
// have installed for the suite: the ModelDeployment and InstanceType CRDs with
// the operator's schema, Kueue's LocalQueue CRD, and one accelerated, Active
// InstanceType. The objects are YAML data under manifests/, each citing its
// source.
package install

import (
	"context"
	"embed"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// Manifest files, in install order.
const (
	ModelDeploymentCRD = "manifests/modeldeployments.yaml"
	InstanceTypeCRD    = "manifests/instancetypes.yaml"
	LocalQueueCRD      = "manifests/localqueues.yaml"
	SimInstanceType    = "manifests/instancetype-sim-gpu.yaml"
)

// CRDs lists the CustomResourceDefinitions CRDs installs.
var CRDs = []string{ModelDeploymentCRD, InstanceTypeCRD, LocalQueueCRD}

// establishTimeout bounds the wait for a CRD to be served; the API server
// establishes one in well under a second.
const establishTimeout = 30 * time.Second

var (
	gvrCRD          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrInstanceType = schema.GroupVersionResource{Group: "worker.gpustack.ai", Version: "v1alpha1", Resource: "instancetypes"}
)

// Read decodes one embedded manifest.
func Read(name string) (*unstructured.Unstructured, error) {
	b, err := manifests.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// All installs the CRDs, then the InstanceType, and returns the InstanceType
// as the API server stored it.
func All(ctx context.Context, cfg *rest.Config) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, name := range CRDs {
		if err := installCRD(ctx, dyn, name); err != nil {
			return nil, err
		}
	}
	return installInstanceType(ctx, dyn)
}

// installCRD creates the CRD in file name and waits until it is Established.
func installCRD(ctx context.Context, dyn dynamic.Interface, name string) error {
	crd, err := Read(name)
	if err != nil {
		return err
	}
	res := dyn.Resource(gvrCRD)
	if _, err := res.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CRD %s from %s: %w", crd.GetName(), name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := res.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return established(got), nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not Established: %w", crd.GetName(), err)
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// installInstanceType creates the InstanceType and then writes its status
// through the status subresource: a create ignores status, as it does for
// the operator's own objects.
func installInstanceType(ctx context.Context, dyn dynamic.Interface) (*unstructured.Unstructured, error) {
	it, err := Read(SimInstanceType)
	if err != nil {
		return nil, err
	}
	status, _, _ := unstructured.NestedMap(it.Object, "status")
	res := dyn.Resource(gvrInstanceType)
	created, err := res.Create(ctx, it, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create InstanceType %s: %w", it.GetName(), err)
	}
	if err := unstructured.SetNestedMap(created.Object, status, "status"); err != nil {
		return nil, err
	}
	updated, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("write status of InstanceType %s: %w", it.GetName(), err)
	}
	return updated, nil
}
