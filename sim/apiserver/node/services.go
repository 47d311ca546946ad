package node

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpustack/routing-conformance/sim/programs"
)

// programsFor is the node's registry: opts' programs, the rest the sim's
// emulators wired to this node: Service names resolved through the API
// server (KV events travel over real ZMQ between the Pods' addresses).
func (n *Node) programsFor(opts Options) programs.Registry {
	return opts.Programs.Merge(programs.New(programs.Deps{
		HTTPClient: programs.ServiceClient(n.ResolveService)}))
}

// configMap reads a ConfigMap for a container's env and volumes when it
// starts, as the kubelet does (a direct read: the ConfigMap the operator
// wrote just before the Pod must be seen).
func (n *Node) configMap(namespace, name string) (map[string]string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cm, err := n.kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			n.opts.Logf("sim node: ConfigMap %s/%s: %v", namespace, name, err)
		}
		return nil, false
	}
	return cm.Data, true
}

// ResolveService is a ready, not terminating Pod of Service ns/svc, on the
// target port of the Service's port (a programs.ResolveService).
func (n *Node) ResolveService(ctx context.Context, svc, ns, port string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := n.kube.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("lookup %s.%s.svc: %w", svc, ns, err)
	}
	target := port
	for _, p := range s.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == port && p.TargetPort.IntValue() > 0 {
			target = strconv.Itoa(p.TargetPort.IntValue())
		}
	}
	pods, err := n.pods.Pods(ns).List(labels.SelectorFromSet(s.Spec.Selector))
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(p) {
			return net.JoinHostPort(p.Status.PodIP, target), nil
		}
	}
	return "", fmt.Errorf("service %s/%s has no ready endpoint", ns, svc)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
