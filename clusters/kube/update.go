package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// PatchOp is one RFC 6902 JSON patch operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// MarshalJSON writes value for add and replace even when it is 0, false or
// null (omitempty would drop those), and leaves it out of remove.
func (o PatchOp) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	type plain PatchOp
	return json.Marshal(plain(o))
}

// Update applies mutate to a copy of the live object and submits only what
// changed, as a JSON patch of the changed leaves (e.g. replace
// /spec/router/extraArgs, replace /spec/roles/0/replicas). A merge patch
// would restate roles and read as an edit of frozen fields
// (docs/operator.md#identity-and-editable-fields).
// When the router's Pod template changes (extraArgs, image, timeouts, or a
// router added), Update waits for the rollout to be over (only Ready router
// Pods of the new args left) or for a router Pod of the new args to have
// failed, bounded by Intervals.RouterRollout. Only spec, labels and annotations are compared.
func (d *Deployment) Update(ctx context.Context, mutate func(*api.ModelDeployment)) error {
	old, err := d.Object(ctx)
	if err != nil {
		return err
	}
	next, err := deepCopyMD(old)
	if err != nil {
		return fmt.Errorf("update %s/%s: %w", d.ns, d.name, err)
	}
	mutate(next)
	ops, err := modelDeploymentPatch(old, next)
	if err != nil {
		return fmt.Errorf("update %s/%s: %w", d.ns, d.name, err)
	}
	if len(ops) == 0 {
		return nil
	}
	rolls := routerRolls(old.Spec.Router, next.Spec.Router)
	if rolls {
		// The router Pods before the edit run the args before it: seen now,
		// their revision is never taken for the edit's.
		pods, err := d.routerPods(ctx)
		if err != nil {
			return err
		}
		d.currentRouterPods(pods)
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("update %s/%s: encode patch: %w", d.ns, d.name, err)
	}
	_, err = d.c.dyn.Resource(gvrModelDeployment).Namespace(d.ns).Patch(ctx, d.name, types.JSONPatchType, body, metav1.PatchOptions{})
	if err != nil {
		if ae := asAdmissionError(err); ae != err {
			return ae
		}
		return fmt.Errorf("patch ModelDeployment %s/%s with %s: %s", d.ns, d.name, body, firstLine(err.Error()))
	}
	d.mu.Lock()
	d.routerName = routerName(next)
	d.mu.Unlock()
	if next.Spec.Router != nil {
		d.revisions.wrote(next.Spec.Router.ExtraArgs)
	}
	if d.cost != nil {
		d.cost.setRoles(next)
	}
	d.c.logf("kube: patched ModelDeployment %s/%s: %s", d.ns, d.name, body)
	if !rolls {
		return nil
	}
	// The traffic URL needs nothing: its next connection goes to a Ready
	// router Pod, as the Service's would (localProxy).
	return d.waitRollout(ctx, next)
}

// routerRolls reports whether the edit replaces the router Pod: argv routers
// get new container args, llm-d a new config hash annotation. Replicas alone
// scales without replacing.
func routerRolls(old, next *api.Router) bool {
	if next == nil {
		return false
	}
	if old == nil {
		return true
	}
	a, b := *old, *next
	a.Replicas, b.Replicas = nil, nil
	return !reflect.DeepEqual(a, b)
}

// waitRollout waits until the router rollout of next is over (only Ready
// router Pods of its args left, rollout.go) or a router Pod of its args has
// visibly failed (a crash-looping router is a valid outcome of an edit to
// a bad --policy: the old Pod keeps serving and the caller inspects
// RouterState and the logs). An edit back to the args of a revision that
// still has its Pods (after a refused value) is over once the refusing Pod
// is gone.
func (d *Deployment) waitRollout(ctx context.Context, next *api.ModelDeployment) error {
	ctx, cancel := context.WithTimeout(ctx, d.c.iv.RouterRollout)
	defer cancel()
	err := poll(ctx, d.c.iv.Poll, func(ctx context.Context) (bool, string, error) {
		pods, err := d.routerPods(ctx)
		if err != nil {
			return false, firstLine(err.Error()), nil
		}
		revs := d.currentRouterPods(pods)
		for _, p := range revs {
			if p.current && podFailed(p.pod) {
				return true, "", nil
			}
		}
		gap := clusters.RolloutGap(next, revs, func(p routerPodRevision) (string, bool, bool) {
			return p.pod.Name, p.current, podReady(p.pod)
		})
		return gap == "", gap, nil
	})
	if err != nil {
		return fmt.Errorf("after updating %s/%s: %w", d.ns, d.name, err)
	}
	return nil
}

// podFailed: a container is crash-looping, stuck, or has exited.
func podFailed(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed || podTerminal(p) != "" {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil || (cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff") {
			return true
		}
	}
	return false
}

func podSummary(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			s += fmt.Sprintf(", %s waiting: %s", cs.Name, cs.State.Waiting.Reason)
		case cs.State.Running != nil && !cs.Ready:
			s += fmt.Sprintf(", %s running, not ready", cs.Name)
		}
	}
	return s
}

// modelDeploymentPatch diffs the modelled fields of two objects into JSON
// patch operations on spec, labels and annotations.
func modelDeploymentPatch(old, next *api.ModelDeployment) ([]PatchOp, error) {
	var ops []PatchOp
	for _, part := range []struct {
		path string
		a, b any
	}{
		{"/metadata/labels", old.Metadata.Labels, next.Metadata.Labels},
		{"/metadata/annotations", old.Metadata.Annotations, next.Metadata.Annotations},
		{"/spec", old.Spec, next.Spec},
	} {
		a, err := toJSONValue(part.a)
		if err != nil {
			return nil, err
		}
		b, err := toJSONValue(part.b)
		if err != nil {
			return nil, err
		}
		if a == nil && b != nil {
			ops = append(ops, PatchOp{Op: "add", Path: part.path, Value: b})
			continue
		}
		if b == nil {
			if a != nil {
				ops = append(ops, PatchOp{Op: "remove", Path: part.path})
			}
			continue
		}
		ops = append(ops, jsonDiff(part.path, a, b)...)
	}
	return ops, nil
}

func toJSONValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if m, ok := out.(map[string]any); ok && len(m) == 0 {
		return nil, nil
	}
	return out, nil
}

// jsonDiff emits the smallest operations that turn a into b: objects are
// compared key by key, lists of objects of equal length element by element
// (so a role edit names its index), anything else is replaced whole (lists of
// strings such as extraArgs are atomic in the API).
func jsonDiff(path string, a, b any) []PatchOp {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		var ops []PatchOp
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			p := path + "/" + escapePointer(k)
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case inA && !inB:
				ops = append(ops, PatchOp{Op: "remove", Path: p})
			case !inA && inB:
				ops = append(ops, PatchOp{Op: "add", Path: p, Value: y})
			default:
				ops = append(ops, jsonDiff(p, x, y)...)
			}
		}
		return ops
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) || !allObjects(av) || !allObjects(bv) {
			break
		}
		var ops []PatchOp
		for i := range av {
			ops = append(ops, jsonDiff(fmt.Sprintf("%s/%d", path, i), av[i], bv[i])...)
		}
		return ops
	}
	return []PatchOp{{Op: "replace", Path: path, Value: b}}
}

func allObjects(list []any) bool {
	for _, v := range list {
		if _, ok := v.(map[string]any); !ok {
			return false
		}
	}
	return len(list) > 0
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
