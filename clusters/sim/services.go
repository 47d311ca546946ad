package sim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/llmd/epp"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
)

// configMap is the kubelet's ConfigMap lookup: the router ConfigMap a live
// deployment's controller has rendered.
func (c *Cluster) configMap(namespace, name string) (map[string]string, bool) {
	for _, d := range c.liveIn(namespace) {
		if data, ok := d.ctrl.ConfigMap(name); ok {
			return data, true
		}
	}
	return nil, false
}

// liveIn lists the deployments of namespace that are not gone.
func (c *Cluster) liveIn(namespace string) []*deployment {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []*deployment
	for _, d := range c.deployments {
		if d.namespace == namespace && !d.ctrl.Gone() {
			ds = append(ds, d)
		}
	}
	return ds
}

// eppStarted keeps each EPP's picker seed.
func (c *Cluster) eppStarted(info epp.StartInfo) {
	c.mu.Lock()
	c.seeds[info.Namespace+"/"+info.Pod] = info.Seed
	c.mu.Unlock()
}

func (c *Cluster) seed(key string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.seeds[key]
	return s, ok
}

// serviceClient is the client in-cluster programs use for Service names
// (programs.ServiceClient over resolveService): the EPP's client for engine
// metrics and for the tokenizer role Service's /render.
func (c *Cluster) serviceClient() *http.Client {
	return programs.ServiceClient(func(_ context.Context, svc, ns, port string) (string, error) {
		ip, err := c.resolveService(svc, ns)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(ip, port), nil
	})
}

// resolveService picks a ready Pod of one of the Services the operator
// renders for a deployment in ns (docs/operator.md#services):
// <md>-<role> (that role's Pods), <md> (the first role's); <md>-router is
// the ClusterIP of the router Service's kube-proxy emulation, which spreads
// connections over the router Pods (controller/service.go).
func (c *Cluster) resolveService(svc, ns string) (string, error) {
	for _, d := range c.liveIn(ns) {
		md := d.ctrl.Object()
		selector := map[string]string{}
		switch {
		case svc == operator.RouterServiceName(md) && md.Spec.Router != nil:
			u, _, err := d.ctrl.RouterServiceURL()
			if err != nil {
				return "", fmt.Errorf("service %s/%s: %w", ns, svc, err)
			}
			ip, _, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
			return ip, err
		case svc == md.Metadata.Name && len(md.Spec.Roles) > 0:
			selector = operator.RoleSelector(md, &md.Spec.Roles[0])
		default:
			found := false
			for i := range md.Spec.Roles {
				if svc == md.Metadata.Name+"-"+md.Spec.Roles[i].Name {
					selector, found = operator.RoleSelector(md, &md.Spec.Roles[i]), true
				}
			}
			if !found {
				continue
			}
		}
		for _, p := range c.kube.ListStatus(ns, selector) {
			if p.Ready && !p.Deleting() && (selector[api.LabelRouter] != "" || p.Labels[api.LabelRouter] == "") {
				return p.IP, nil
			}
		}
		return "", fmt.Errorf("service %s/%s has no ready endpoint", ns, svc)
	}
	return "", fmt.Errorf("lookup %s.%s.svc: no such host", svc, ns)
}
