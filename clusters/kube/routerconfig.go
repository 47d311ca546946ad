package kube

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpustack/routing-conformance/clusters"
)

// RouterConfig reads the live router ConfigMap <md>-router, which the
// operator renders for llm-d-router only (epp.yaml, envoy.yaml,
// endpoint-selector, endpoint-target-ports, extra-args.json;
// docs/operator.md#router-objects). A missing one wraps clusters.ErrNotFound.
func (d *Deployment) RouterConfig(ctx context.Context) (map[string]string, error) {
	name := d.name + "-router"
	cm, err := d.c.kube.CoreV1().ConfigMaps(d.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("configmaps %q %w in namespace %q (the operator renders it for llm-d-router only)",
			name, clusters.ErrNotFound, d.ns)
	}
	if err != nil {
		return nil, fmt.Errorf("get ConfigMap %s/%s: %w", d.ns, name, err)
	}
	return maps.Clone(cm.Data), nil
}
