package node

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpustack/routing-conformance/sim/apiserver/podconv"
	"github.com/gpustack/routing-conformance/sim/kubelet"
)

// handler queues every Pod change for the sync loop and ticks the routers'
// Pods API.
func (n *Node) handler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			n.work.Add(key)
		}
		n.watch.Notify()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (n *Node) runPods(ctx context.Context) {
	for {
		key, shutdown := n.work.Get()
		if shutdown {
			return
		}
		if err := n.syncPod(ctx, key); err != nil && ctx.Err() == nil {
			n.opts.Logf("sim node: pod %s: %v (retrying)", key, err)
			n.work.AddRateLimited(key)
		} else {
			n.work.Forget(key)
		}
		n.work.Done(key)
	}
}

// syncPod makes the kubelet match one stored Pod: an unscheduled Pod is
// bound here (the agent is the only node, so it is also the scheduler); a
// Pod bound here runs; a deleted one is stopped, then removed from the API
// once its containers have stopped (the kubelet's final delete, grace 0).
func (n *Node) syncPod(ctx context.Context, key string) error {
	ns, name := podconv.SplitKey(key)
	pod, err := n.pods.Pods(ns).Get(name)
	running, isRunning := n.kubel.Get(ns, name)
	if apierrors.IsNotFound(err) {
		if isRunning {
			n.kubel.Delete(ns, name) // force-deleted from the API
		}
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp != nil {
			return n.deleteFinal(ctx, pod)
		}
		return n.bind(ctx, pod)
	}
	if pod.Spec.NodeName != n.opts.Name {
		return nil
	}
	if isRunning && running.UID != string(pod.UID) {
		// A new Pod under an old name: the old one goes first.
		n.kubel.Delete(ns, name)
		return errors.New("an earlier Pod of this name is still stopping")
	}
	switch {
	case pod.DeletionTimestamp != nil && isRunning:
		n.kubel.Delete(ns, name)
		return nil
	case pod.DeletionTimestamp != nil:
		return n.deleteFinal(ctx, pod)
	case isRunning:
		return nil
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil // ran here once and ended
	}
	_, err = n.kubel.Create(podconv.FromPod(pod, n.opts.Programs))
	return err
}

// bind assigns pod to this node, as the scheduler would.
func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err := n.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.opts.Name},
	}, metav1.CreateOptions{})
	if err == nil {
		n.events.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s",
			pod.Namespace, pod.Name, n.opts.Name)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or bound already
	}
	return err
}

// deleteFinal removes a Pod whose containers have stopped.
func (n *Node) deleteFinal(ctx context.Context, pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err := n.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// kubeletChanged is the kubelet's StatusSink: it keeps the newest word per
// Pod and queues a write (the sink must not block on the API).
func (n *Node) kubeletChanged(u kubelet.PodUpdate) {
	key := podconv.Key(u.Pod.Namespace, u.Pod.Name)
	n.mu.Lock()
	n.latest[key] = u
	n.mu.Unlock()
	n.statuses.Add(key)
}

// kubeletEvent records a kubelet event on its Pod.
func (n *Node) kubeletEvent(e kubelet.Event) {
	pod, err := n.pods.Pods(e.Namespace).Get(e.Pod)
	if err != nil {
		return // the Pod is gone from the API already
	}
	n.events.Event(pod, e.Type, e.Reason, e.Message)
}
