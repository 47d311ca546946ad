package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpustack/routing-conformance/api"
)

// InstanceType is what the suite reads from one cluster-scoped
// instancetypes.worker.gpustack.ai object.
type InstanceType struct {
	Name string
	// Phase is status.phase; only "Active" types take new workloads.
	Phase string
	// Acceleratable is spec.acceleratable.
	Acceleratable bool
	// Remaining is status.accelerator.remaining: whole accelerators free.
	Remaining int64
	// Entrance is status.entrance: the LocalQueue name workloads must use
	// (gpustack-fnv64-<hash> in current operators; older ones used the name).
	Entrance string
	// Product is status.detail.product, e.g. "NVIDIA H20".
	Product string
}

// PhaseActive is the InstanceType phase that admits workloads.
const PhaseActive = "Active"

// CapacityError says why a spec cannot run here; its Error is the skip reason.
type CapacityError struct {
	Need   int64
	Reason string
}

func (e *CapacityError) Error() string { return e.Reason }

// InstanceTypes lists the cluster's InstanceTypes sorted by name.
func (c *Cluster) InstanceTypes(ctx context.Context) ([]InstanceType, error) {
	list, err := c.dyn.Resource(gvrInstanceType).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list instancetypes.%s: %s", api.Group, firstLine(err.Error()))
	}
	out := make([]InstanceType, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, readInstanceType(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func readInstanceType(u *unstructured.Unstructured) InstanceType {
	it := InstanceType{Name: u.GetName()}
	it.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	it.Acceleratable, _, _ = unstructured.NestedBool(u.Object, "spec", "acceleratable")
	it.Entrance, _, _ = unstructured.NestedString(u.Object, "status", "entrance")
	it.Product, _, _ = unstructured.NestedString(u.Object, "status", "detail", "product")
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "accelerator", "remaining"); ok {
		it.Remaining = quantityValue(v)
	}
	return it
}

// quantityValue reads a resource.Quantity as JSON gives it: "4", 4 or "4k".
func quantityValue(v any) int64 {
	switch x := v.(type) {
	case string:
		q, err := resource.ParseQuantity(x)
		if err != nil {
			return 0
		}
		return q.Value()
	case int64:
		return x
	case float64:
		return int64(x)
	case int:
		return int64(x)
	}
	return 0
}

// Capacity picks the InstanceType a deployment needing accelerators whole
// accelerators would run on: Options.InstanceType when set, otherwise the
// Active accelerated InstanceType with the most remaining (ties by name).
// When none fits it returns *CapacityError whose text is the skip reason.
func (c *Cluster) Capacity(ctx context.Context, accelerators int64) (InstanceType, error) {
	its, err := c.InstanceTypes(ctx)
	if err != nil {
		return InstanceType{}, err
	}
	it, ce := c.chooseInstanceType(its, accelerators)
	if ce != nil {
		return InstanceType{}, ce
	}
	return it, nil
}

// chooseInstanceType is Capacity's choice among its, already listed, so a
// caller that needs the list for more than the choice reads it once.
func (c *Cluster) chooseInstanceType(its []InstanceType, accelerators int64) (InstanceType, *CapacityError) {
	var best *InstanceType
	var seen []string
	for i := range its {
		it := &its[i]
		if c.opts.InstanceType != "" && it.Name != c.opts.InstanceType {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s (phase %s, acceleratable %t, %d remaining)", it.Name, orNone(it.Phase), it.Acceleratable, it.Remaining))
		if it.Phase != PhaseActive || !it.Acceleratable {
			continue
		}
		if best == nil || it.Remaining > best.Remaining {
			best = it
		}
	}
	switch {
	case c.opts.InstanceType != "" && len(seen) == 0:
		return InstanceType{}, &CapacityError{Need: accelerators, Reason: fmt.Sprintf("InstanceType %q (from the suite config) does not exist; kubectl get instancetypes lists %d", c.opts.InstanceType, len(its))}
	case len(its) == 0:
		return InstanceType{}, &CapacityError{Need: accelerators, Reason: "no InstanceType exists: the operator has discovered no nodes with accelerators (kubectl get instancetypes)"}
	case best == nil:
		return InstanceType{}, &CapacityError{Need: accelerators, Reason: "no Active accelerated InstanceType: " + strings.Join(seen, "; ")}
	case best.Remaining < accelerators:
		return InstanceType{}, &CapacityError{Need: accelerators, Reason: fmt.Sprintf("needs %d free accelerators on one Active InstanceType; the most is %d on %s", accelerators, best.Remaining, best.Name)}
	}
	return *best, nil
}

// CanRun is the per-spec capability query: whether md fits the accelerators
// free now, and if not the reason to skip with. Roles that name an
// InstanceType are checked against that one; the rest against Capacity.
func (c *Cluster) CanRun(ctx context.Context, md *api.ModelDeployment) (bool, string, error) {
	byType := map[string]int64{}
	var unplaced int64
	for _, r := range md.Spec.Roles {
		if r.InstanceType == "" {
			unplaced += roleAccelerators(r)
		} else {
			byType[r.InstanceType] += roleAccelerators(r)
		}
	}
	if unplaced == 0 && len(byType) == 0 {
		return true, "", nil
	}
	its, err := c.InstanceTypes(ctx)
	if err != nil {
		return false, "", err
	}
	if unplaced > 0 {
		if _, ce := c.chooseInstanceType(its, unplaced); ce != nil {
			return false, ce.Reason, nil
		}
	}
	idx := map[string]InstanceType{}
	for _, it := range its {
		idx[it.Name] = it
	}
	for _, name := range slices.Sorted(maps.Keys(byType)) {
		it, ok := idx[name]
		switch {
		case !ok:
			return false, fmt.Sprintf("InstanceType %q does not exist (kubectl get instancetypes)", name), nil
		case it.Phase != PhaseActive:
			return false, fmt.Sprintf("InstanceType %q is %s, not Active", name, orNone(it.Phase)), nil
		case it.Remaining < byType[name]:
			return false, fmt.Sprintf("needs %d free accelerators on InstanceType %s; %d remaining", byType[name], name, it.Remaining), nil
		}
	}
	return true, "", nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
