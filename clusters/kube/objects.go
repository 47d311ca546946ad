package kube

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpustack/routing-conformance/api"
)

// The operator's resources, read from gpustack-operator's source:
// api/worker/v1alpha1 (+groupName=worker.gpustack.ai) holds ModelDeployment
// (namespaced) and InstanceType (cluster-scoped, "mapping to a Kueue
// ClusterQueue" of the same name); api/v1 (+groupName=gpustack.ai) holds
// Setting, served by the operator's aggregated API in gpustack-system.
var (
	gvrModelDeployment = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: api.Resource}
	gvrInstanceType    = schema.GroupVersionResource{Group: api.Group, Version: "v1alpha1", Resource: "instancetypes"}
	gvrSetting         = schema.GroupVersionResource{Group: "gpustack.ai", Version: "v1", Resource: "settings"}
	gvrCRD             = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// Kueue serves LocalQueue as v1beta2 in current releases (the operator's
// controllers import kueue/apis/kueue/v1beta2) and v1beta1 in older ones; the
// served one is found through discovery.
const kueueGroup = "kueue.x-k8s.io"

var kueueVersions = []string{"v1beta2", "v1beta1"}

func gvrLocalQueue(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: kueueGroup, Version: version, Resource: "localqueues"}
}

// CRDName is the CustomResourceDefinition the suite needs served.
const CRDName = api.Resource + "." + api.Group

// toUnstructured converts the suite's typed object to what the dynamic client
// sends. Status is dropped: the server owns it.
func toUnstructured(md *api.ModelDeployment) (*unstructured.Unstructured, error) {
	c := *md
	c.APIVersion = api.APIVersion
	c.Kind = api.Kind
	c.Status = api.ModelDeploymentStatus{}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode ModelDeployment %s: %w", md.Metadata.Name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encode ModelDeployment %s: %w", md.Metadata.Name, err)
	}
	delete(m, "status")
	meta, _ := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "generation", "creationTimestamp"} {
		delete(meta, k)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// fromUnstructured reads a live object into the suite's types; fields the
// suite does not model (e.g. shmSize) are dropped, which is why updates are
// JSON patches over the modelled fields only.
func fromUnstructured(u *unstructured.Unstructured) (*api.ModelDeployment, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("decode ModelDeployment %s: %w", u.GetName(), err)
	}
	var md api.ModelDeployment
	if err := json.Unmarshal(b, &md); err != nil {
		return nil, fmt.Errorf("decode ModelDeployment %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &md, nil
}

func deepCopyMD(md *api.ModelDeployment) (*api.ModelDeployment, error) {
	b, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	var out api.ModelDeployment
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// parseQuantityInt reads a Kubernetes quantity ("2", "1k") as a whole number,
// or def when it does not parse.
func parseQuantityInt(s string, def int64) int64 {
	if s == "" {
		return def
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return def
	}
	return q.Value()
}
