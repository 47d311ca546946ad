package controller

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/service"
)

// The <md>-router Service (docs/operator.md#services): a ClusterIP on port
// 8081 whose selector is the router Pod template's labels. The sim runs it
// as package service's kube-proxy emulation on an address of its own, and
// keeps its endpoints as the EndpointSlice controller would, from every
// status update of the router Pods. The operator's own serving view still
// reads each router Pod on its own address (observe.go).

// routerService returns the running Service, starting it when the
// deployment has a router and none runs yet, and stopping it when the
// router was removed. Called by the loop only.
func (c *Controller) routerService(md *api.ModelDeployment) {
	c.mu.Lock()
	svc := c.svc
	c.mu.Unlock()
	switch {
	case md.Spec.Router == nil && svc != nil:
		c.stopService()
	case md.Spec.Router != nil && svc == nil:
		ip, err := kubelet.AllocateAddress([]int{api.RouterHTTPPort})
		if err != nil {
			c.warn("FailedToAllocateIP", fmt.Sprintf("Service %s-router: %v", c.name, err))
			return
		}
		s, err := service.Listen(c.name+"-router", ip, api.RouterHTTPPort, api.RouterHTTPPort)
		if err != nil {
			kubelet.ReleaseAddress(ip)
			c.warn("FailedToStartService", err.Error())
			return
		}
		c.mu.Lock()
		c.svc, c.svcIP = s, ip
		s.SetEndpoints(c.endpointList())
		c.mu.Unlock()
		c.normal("ServiceCreated", fmt.Sprintf("Service %s-router: ClusterIP %s, port %d", c.name, ip, api.RouterHTTPPort))
	}
}

// stopService closes the Service and gives its address back.
func (c *Controller) stopService() {
	c.mu.Lock()
	s, ip := c.svc, c.svcIP
	c.svc, c.svcIP = nil, ""
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
		kubelet.ReleaseAddress(ip)
	}
}

// routerEndpointChanged keeps the Service's endpoints from one router Pod's
// status update, as the EndpointSlice controller does: a terminating Pod is
// not ready, and a removed one is gone.
func (c *Controller) routerEndpointChanged(u kubelet.PodUpdate) {
	p := u.Pod
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.endpoints == nil {
		c.endpoints = map[string]service.Endpoint{}
	}
	if u.Removed {
		delete(c.endpoints, p.UID)
	} else {
		c.endpoints[p.UID] = service.Endpoint{Name: p.Name, IP: p.IP, Ready: p.Ready && !p.Deleting(),
			Serving: p.Ready, Terminating: p.Deleting()}
	}
	if c.svc != nil {
		c.svc.SetEndpoints(c.endpointList())
	}
}

// endpointList is the endpoints sorted by Pod name; c.mu is held.
func (c *Controller) endpointList() []service.Endpoint {
	out := slices.Collect(maps.Values(c.endpoints))
	slices.SortFunc(out, func(a, b service.Endpoint) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// RouterServiceURL is http://<ClusterIP>:8081: where a client inside the
// cluster reaches the router (the sim's <md>-router.<ns>.svc:8081), with
// the endpoints a new connection may go to now. It is an error when the
// deployment has no router or the Service is not running.
func (c *Controller) RouterServiceURL() (string, []service.Endpoint, error) {
	c.mu.Lock()
	s, ip := c.svc, c.svcIP
	c.mu.Unlock()
	if s == nil {
		return "", nil, fmt.Errorf("%s has no router Service", c.key())
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(api.RouterHTTPPort)), s.Usable(), nil
}

// RouterServiceConnections counts the connections the Service forwarded
// to each router Pod (by name) so far.
func (c *Controller) RouterServiceConnections() map[string]int {
	c.mu.Lock()
	s := c.svc
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Connections()
}
