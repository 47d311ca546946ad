package node

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpustack/routing-conformance/sim/apiserver/podconv"
)

func (n *Node) runStatuses(ctx context.Context) {
	for {
		key, shutdown := n.statuses.Get()
		if shutdown {
			return
		}
		if err := n.writeStatus(ctx, key); err != nil && ctx.Err() == nil {
			n.opts.Logf("sim node: status of pod %s: %v (retrying)", key, err)
			n.statuses.AddRateLimited(key)
		} else {
			n.statuses.Forget(key)
		}
		n.statuses.Done(key)
	}
}

// writeStatus writes the kubelet's newest word on one Pod through the
// status subresource, or, once the kubelet has removed the Pod, deletes it
// from the API (grace 0: its containers have stopped).
func (n *Node) writeStatus(ctx context.Context, key string) error {
	n.mu.Lock()
	u, ok := n.latest[key]
	if ok && u.Removed {
		delete(n.latest, key)
	}
	n.mu.Unlock()
	if !ok {
		return nil
	}
	ns, name := podconv.SplitKey(key)
	pod, err := n.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if string(pod.UID) != u.Pod.UID {
		return nil // a newer Pod of that name
	}
	if u.Removed {
		return n.deleteFinal(ctx, pod)
	}
	// A merge patch of the whole status, bound to the Pod's UID: lists
	// (conditions, container statuses) are replaced whole, and no
	// resourceVersion is needed, so a lagging informer causes no conflict.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   podconv.Status(pod, u.Pod, n.opts.IP),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err = n.kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or a newer Pod of that name
	}
	return err
}
