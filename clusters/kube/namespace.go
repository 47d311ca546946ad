package kube

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// CreateNamespace creates a fresh namespace for one spec, named
// <prefix><base>-<random><suffix> (prefix and suffix from Options, e.g.
// "rc-" and "-p2"), labelled as this suite's and this run's. Its removal is
// DeleteNamespace, which checks those labels first.
func (c *Cluster) CreateNamespace(ctx context.Context, base string) (string, error) {
	name := namespaceName(c.opts.NamespacePrefix, base, randomSuffix(5), c.opts.NamespaceSuffix)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: c.ownerLabels(),
	}}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create namespace %s: %s", name, firstLine(err.Error()))
	}
	c.logf("kube: created namespace %s (run %s)", name, c.opts.RunID)
	return name, nil
}

func (c *Cluster) ownerLabels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelRunID: c.opts.RunID}
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceName builds a DNS-1123 label of at most 63 characters:
// <prefix>-<base>-<random><suffix>, the base shortened to fit.
func namespaceName(prefix, base, random, suffix string) string {
	clean := func(s string) string { return strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(s), "-"), "-") }
	prefix, base, suffix = clean(prefix), clean(base), clean(suffix)
	tail := "-" + random
	if suffix != "" {
		tail += "-" + suffix
	}
	head := prefix
	if head == "" {
		head = "rc"
	}
	if max := 63 - len(head) - len(tail) - 1; len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	if base == "" {
		return head + tail
	}
	return head + "-" + base + tail
}

// EnsureLocalQueue makes sure namespace ns has the Kueue LocalQueue that
// fronts the InstanceType's ClusterQueue. The operator creates one in every
// non-system namespace itself (GO controllers/worker/localqueue.go); the suite
// creates it when the operator has not yet, under the name the operator's Pods
// ask for: status.entrance (gpustack-fnv64-<hash> of the ClusterQueue name),
// or the InstanceType name on operators that predate the entrance field. The
// ClusterQueue carries the InstanceType's name.
func (c *Cluster) EnsureLocalQueue(ctx context.Context, ns string, it InstanceType) error {
	gvr, err := c.localQueueGVR(ctx)
	if err != nil {
		return err
	}
	name := it.Entrance
	if name == "" {
		name = it.Name
	}
	res := c.dyn.Resource(gvr).Namespace(ns)
	if _, err := res.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get LocalQueue %s/%s: %s", ns, name, firstLine(err.Error()))
	}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.Group + "/" + gvr.Version,
		"kind":       "LocalQueue",
		"metadata": map[string]any{
			"name":      name,
			"namespace": ns,
			"labels":    toAnyMap(c.ownerLabels()),
		},
		"spec": map[string]any{"clusterQueue": it.Name},
	}}
	if _, err := res.Create(ctx, lq, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create LocalQueue %s/%s for InstanceType %s: %s", ns, name, it.Name, firstLine(err.Error()))
	}
	return nil
}

// DeleteNamespace removes a namespace this suite created and waits until it
// is gone (so its accelerators are free for the next spec). It refuses a
// namespace without this suite's and this run's labels. A namespace already
// gone is not an error.
func (c *Cluster) DeleteNamespace(ctx context.Context, name string) error {
	return c.deleteNamespace(ctx, name, true)
}

func (c *Cluster) deleteNamespace(ctx context.Context, name string, wait bool) error {
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s before deleting it: %s", name, firstLine(err.Error()))
	}
	if ns.Labels[LabelManagedBy] != ManagedByValue || ns.Labels[LabelRunID] != c.opts.RunID {
		return fmt.Errorf("refusing to delete namespace %s: it lacks labels %s=%s and %s=%s, so this run did not create it", name, LabelManagedBy, ManagedByValue, LabelRunID, c.opts.RunID)
	}
	return c.deleteNamespaceAndWait(ctx, ns, wait)
}

func (c *Cluster) deleteNamespaceAndWait(ctx context.Context, ns *corev1.Namespace, wait bool) error {
	ctx, cancel := context.WithTimeout(ctx, c.iv.Delete)
	defer cancel()
	uid := ns.UID
	pre := metav1.Preconditions{UID: &uid}
	err := c.kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{Preconditions: &pre})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %s", ns.Name, firstLine(err.Error()))
	}
	c.logf("kube: deleting namespace %s", ns.Name)
	if !wait {
		return nil
	}
	return poll(ctx, c.iv.Poll, func(ctx context.Context) (bool, string, error) {
		got, err := c.kube.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && got.UID != uid) {
			return true, "", nil
		}
		if err != nil {
			return false, firstLine(err.Error()), nil
		}
		return false, fmt.Sprintf("namespace %s is %s", ns.Name, got.Status.Phase), nil
	})
}

// DeleteRunNamespaces removes every namespace labelled with this run's id:
// the safety net for an AfterSuite after interrupted specs.
func (c *Cluster) DeleteRunNamespaces(ctx context.Context) error {
	sel := labels.SelectorFromSet(c.ownerLabels()).String()
	list, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list namespaces %s: %s", sel, firstLine(err.Error()))
	}
	var errs []string
	for i := range list.Items {
		if err := c.DeleteNamespace(ctx, list.Items[i].Name); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// poll runs check every interval until it reports done, returns an error, or
// ctx ends; the timeout error carries the last "what is missing" text.
func poll(ctx context.Context, interval time.Duration, check func(context.Context) (bool, string, error)) error {
	if interval <= 0 {
		interval = DefaultIntervals.Poll
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, missing, err := check(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if missing == "" {
				return ctx.Err()
			}
			return fmt.Errorf("%s (%w)", missing, ctx.Err())
		case <-t.C:
		}
	}
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
