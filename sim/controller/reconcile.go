package controller

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
	"github.com/gpustack/routing-conformance/sim/programs"
)

// Engine probes as the operator renders them (model_deployment_render.go):
// GET /health on the serving port; startup 180 periods, readiness 3,
// liveness 6. Periods are Timing.ProbePeriod.
const (
	startupFailureThreshold   = 180
	readinessFailureThreshold = 3
	livenessFailureThreshold  = 6
)

// Observation pacing: fast until every role's serving view has converged to
// its desired count, then slow, as a view stays valid for ServingValidity.
const (
	observeFast = 100 * time.Millisecond
	observeSlow = time.Second
)

// ownedPods lists this deployment's Pods: engines (component label) and
// routers (router label).
func (c *Controller) ownedPods(name, namespace string) (engines map[string][]kubelet.PodStatus, routers []kubelet.PodStatus) {
	engines = map[string][]kubelet.PodStatus{}
	for _, p := range c.store().ListStatus(namespace, map[string]string{
		api.LabelName: api.NameValue, api.LabelInstance: name}) {
		if _, ok := p.Labels[api.LabelRouter]; ok {
			routers = append(routers, p)
			continue
		}
		if role, ok := p.Labels[api.LabelComponent]; ok {
			engines[role] = append(engines[role], p)
		}
	}
	return engines, routers
}

// reconcile is one controller pass. It reports true once a deleted
// deployment has no Pods left.
func (c *Controller) reconcile(ctx context.Context) bool {
	c.mu.Lock()
	md := operator.DeepCopy(c.obj)
	deleting := c.deleting
	c.mu.Unlock()
	ns, name := md.Metadata.Namespace, md.Metadata.Name

	engines, routers := c.ownedPods(name, ns)
	if deleting {
		remaining := len(routers)
		for _, ps := range engines {
			remaining += len(ps)
		}
		for _, ps := range engines {
			for _, p := range ps {
				c.store().Delete(ns, p.Name)
			}
		}
		if rs, ok := c.store().(RouterStore); ok {
			// Its Pods would be replaced while the Deployment stands.
			if err := rs.DeleteRouter(md); err != nil {
				c.warn("FailedDelete", fmt.Sprintf("delete router Deployment: %v", err))
			}
		}
		for _, p := range routers {
			c.store().Delete(ns, p.Name)
		}
		c.publish(md, engines, routers, nil, true, "")
		return remaining == 0
	}

	c.mu.Lock()
	replace := c.replaceEngines
	c.replaceEngines = false
	c.mu.Unlock()
	if replace {
		for _, ps := range engines {
			for _, p := range ps {
				c.deletePod(p, "the router was edited (TestOnlyReplaceEnginesOnRouterEdit: this operator replaces engines on a router edit)")
			}
		}
		engines, _ = c.ownedPods(name, ns)
	}
	for i := range md.Spec.Roles {
		c.reconcileRole(md, &md.Spec.Roles[i], engines[md.Spec.Roles[i].Name])
	}
	for role, ps := range engines {
		if !slices.ContainsFunc(md.Spec.Roles, func(r api.Role) bool { return r.Name == role }) {
			for _, p := range ps {
				c.deletePod(p, "role "+role+" is no longer declared")
			}
		}
	}
	// A RouterStore's API server holds the router Service; the sim's
	// kube-proxy emulation is the kubelet path's.
	if _, apply := c.store().(RouterStore); !apply {
		c.routerService(md)
	}
	hash := c.reconcileRouter(md, routers)

	engines, routers = c.ownedPods(name, ns)
	views := c.observe(ctx, md, routers, fingerprint(engines, routers))
	c.publish(md, engines, routers, views, false, hash)
	return false
}

func (c *Controller) reconcileRole(md *api.ModelDeployment, role *api.Role, pods []kubelet.PodStatus) {
	desired := int(role.RoleReplicas())
	occupied := map[int]bool{}
	var live []kubelet.PodStatus
	draining := false
	for _, p := range pods {
		ord, _ := strconv.Atoi(p.Labels[api.LabelOrdinal])
		occupied[ord] = true
		if p.Deleting() {
			draining = true
			continue
		}
		live = append(live, p)
	}
	// Scale down: the replicas at or above the new count go.
	for _, p := range live {
		if ord, _ := strconv.Atoi(p.Labels[api.LabelOrdinal]); ord >= desired {
			c.deletePod(p, fmt.Sprintf("role %s scaled to %d replicas", role.Name, desired))
		}
	}
	// Scale up: a free ordinal gets a Pod; one still draining waits (the
	// operator's create gate, so two Pods never share an ordinal).
	for ord := range desired {
		if !occupied[ord] {
			c.createEngine(md, role, ord)
		}
	}
	// Recreate rollout, one replica at a time, only while the role is whole.
	if draining {
		return
	}
	for _, p := range live {
		if !p.Ready {
			return
		}
	}
	for _, p := range live {
		ord, _ := strconv.Atoi(p.Labels[api.LabelOrdinal])
		if ord >= desired {
			continue
		}
		w, err := operator.RenderEngine(md, role, ord)
		if err == nil && p.Annotations[operator.AnnotationPodSpecHash] != w.PodSpecHash {
			c.deletePod(p, fmt.Sprintf("replica %d of role %s was built from an earlier spec", ord, role.Name))
			return
		}
	}
}

func (c *Controller) createEngine(md *api.ModelDeployment, role *api.Role, ordinal int) {
	w, err := operator.RenderEngine(md, role, ordinal)
	if err != nil {
		c.warn("FailedCreate", fmt.Sprintf("render role %s replica %d: %v", role.Name, ordinal, err))
		return
	}
	var main = c.cfg.Programs.Command(w.Program)
	if main == nil {
		main = programs.NotFound(w.Program)
	}
	env := c.engineEnv()
	for _, e := range w.Env {
		env[e.Name] = e.Value
	}
	period := c.cfg.ProbePeriod
	ports := []int{int(w.Port)}
	for _, p := range w.ExtraPorts {
		ports = append(ports, int(p))
	}
	ctr := kubelet.ContainerSpec{
		Name: w.Container, Image: w.Image, Command: w.Command, Args: w.Args, Env: env,
		Ports: ports, Main: main,
	}
	if !w.Unmanaged {
		probe := func(period time.Duration, threshold int) *kubelet.Probe {
			return &kubelet.Probe{HTTPPath: w.ProbePath, HTTPPort: int(w.ProbePort), Period: period, FailureThreshold: threshold}
		}
		// Startup is polled at the full rate so a replica is Ready soon after it
		// answers; the steady-state probes run 4x slower, because each GET is an
		// access-log line in the engine (the operator's 10 s period makes that
		// one line per probe per 10 s on a cluster).
		ctr.StartupProbe = probe(period, startupFailureThreshold)
		ctr.ReadinessProbe = probe(4*period, readinessFailureThreshold)
		ctr.LivenessProbe = probe(4*period, livenessFailureThreshold)
	}
	spec := kubelet.PodSpec{
		Name: kubelet.GenerateName(w.GenerateName), Namespace: md.Metadata.Namespace,
		Labels: w.Labels, Annotations: w.Annotations, Containers: []kubelet.ContainerSpec{ctr},
		PreStopDelay: c.cfg.PreStopDelay,
	}
	if w.Sidecar != nil {
		// The routing proxy starts first, as a native sidecar does; the
		// engine's probes read through it.
		spec.Containers = append([]kubelet.ContainerSpec{c.containerSpec(*w.Sidecar, "")}, ctr)
	}
	if w.Unmanaged {
		spec.PreStopDelay = 0 // a take-over role gets no drain hook
	}
	c.createPod(spec, "role "+role.Name)
}

func (c *Controller) createPod(spec kubelet.PodSpec, owner string) {
	if _, err := c.store().Create(spec); err != nil {
		c.warn("FailedCreate", fmt.Sprintf("create pod %s for %s: %v", spec.Name, owner, err))
		return
	}
	c.normal("SuccessfulCreate", fmt.Sprintf("Created pod: %s (%s)", spec.Name, owner))
}

func (c *Controller) deletePod(p kubelet.PodStatus, why string) {
	if p.Deleting() {
		return
	}
	if c.store().Delete(p.Namespace, p.Name) {
		c.normal("SuccessfulDelete", fmt.Sprintf("Deleted pod: %s (%s)", p.Name, why))
	}
}

// reconcileRouter is the <md>-router Deployment. The operator renders it
// with no strategy (gpustack/gpustack-operator@36d990eb:pkg/worker/controllers/worker/model_deployment_router.go),
// so the API server defaults it to RollingUpdate with maxSurge and
// maxUnavailable 25% (kubernetes/kubernetes@a79f3c78:pkg/apis/apps/v1/defaults.go,
// SetDefaults_Deployment), which the Deployment controller resolves with
// surge rounded up and unavailable rounded down, unavailable 1 if both come
// to 0 (ResolveFenceposts in pkg/controller/deployment/util). A one-replica
// router therefore gets its new Pod first and loses the old one only once
// the new one is Ready (minReadySeconds 0): the router Service always has a
// Ready endpoint during an edit of extraArgs. A RouterStore's Deployment
// controller does that itself. It returns the pod-template-hash of the
// current template's Pods ("" when there is none or it is not known yet).
func (c *Controller) reconcileRouter(md *api.ModelDeployment, pods []kubelet.PodStatus) string {
	rs, apply := c.store().(RouterStore)
	if md.Spec.Router == nil {
		c.storeConfigMap("", nil)
		if apply {
			if err := rs.DeleteRouter(md); err != nil {
				c.warn("FailedDelete", fmt.Sprintf("delete router Deployment: %v", err))
			}
			return ""
		}
		for _, p := range pods {
			c.deletePod(p, "spec.router was removed")
		}
		return ""
	}
	w, err := c.renderRouter(md)
	if err != nil {
		c.warn("RenderFailed", err.Error())
		return ""
	}
	c.storeConfigMap(w.Name, w.Config)
	if apply {
		hash, err := rs.ApplyRouter(md, w, c.routerPodSpec(md, w))
		if err != nil {
			c.warn("FailedApply", fmt.Sprintf("router Deployment %s: %v", w.Name, err))
		}
		return hash
	}
	desired := int(md.Spec.Router.RouterReplicas())
	surge := int(math.Ceil(float64(desired) * 0.25))
	unavailable := int(math.Floor(float64(desired) * 0.25))
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	var current, old []kubelet.PodStatus
	readyCurrent, readyOld := 0, 0
	for _, p := range pods {
		if p.Deleting() {
			continue
		}
		if p.Labels[operator.LabelPodTemplateHash] == w.TemplateHash {
			current = append(current, p)
			if p.Ready {
				readyCurrent++
			}
		} else {
			old = append(old, p)
			if p.Ready {
				readyOld++
			}
		}
	}
	for len(current) > desired {
		last := current[len(current)-1]
		c.deletePod(last, fmt.Sprintf("router scaled to %d replicas", desired))
		current = current[:len(current)-1]
		if last.Ready {
			readyCurrent--
		}
	}
	for len(current) < desired && len(current)+len(old) < desired+surge {
		c.createRouter(md, w)
		current = append(current, kubelet.PodStatus{})
	}
	// Old Pods go first when they are not ready, then as long as enough
	// ready Pods remain.
	slices.SortFunc(old, func(a, b kubelet.PodStatus) int {
		switch {
		case a.Ready == b.Ready:
			return 0
		case !a.Ready:
			return -1
		}
		return 1
	})
	for _, p := range old {
		if p.Ready && readyCurrent+readyOld-1 < desired-unavailable {
			break
		}
		c.deletePod(p, "router template changed")
		if p.Ready {
			readyOld--
		}
	}
	return w.TemplateHash
}

func (c *Controller) createRouter(md *api.ModelDeployment, w operator.RouterWorkload) {
	c.createPod(c.routerPodSpec(md, w), "router "+md.Spec.Router.Name)
}

// routerPodSpec is one router Pod of template w (a generated name): every
// container of the template with its ConfigMap env and mounts.
func (c *Controller) routerPodSpec(md *api.ModelDeployment, w operator.RouterWorkload) kubelet.PodSpec {
	spec := kubelet.PodSpec{
		Name:        kubelet.GenerateName(w.Name + "-" + w.TemplateHash + "-"),
		Namespace:   md.Metadata.Namespace,
		Labels:      maps.Clone(w.Labels),
		Annotations: maps.Clone(w.Annotations),
	}
	for _, t := range w.Containers {
		spec.Containers = append(spec.Containers, c.containerSpec(t, w.Name))
	}
	return spec
}

// containerSpec is a rendered container template on the kubelet: its
// program from the registry, its env (given, from ConfigMap configMap, or
// from the downward API), its mount and its TCP readiness probe.
func (c *Controller) containerSpec(t operator.ContainerTemplate, configMap string) kubelet.ContainerSpec {
	main := c.cfg.Programs.Command(t.Program)
	if main == nil {
		main = programs.NotFound(t.Program)
	}
	ctr := kubelet.ContainerSpec{
		Name: t.Name, Image: t.Image, Command: append(slices.Clone(t.Command), t.Args...),
		Args: slices.Clone(t.Args), Env: map[string]string{}, Main: main, WatchPods: t.WatchPods,
	}
	for _, p := range t.Ports {
		ctr.Ports = append(ctr.Ports, p.Port)
	}
	for _, e := range t.Env {
		switch {
		case e.ConfigMapKey != "":
			ctr.EnvFrom = append(ctr.EnvFrom, kubelet.EnvSource{Name: e.Name, ConfigMap: configMap, Key: e.ConfigMapKey})
		case e.FieldPath != "":
			ctr.EnvFrom = append(ctr.EnvFrom, kubelet.EnvSource{Name: e.Name, FieldPath: e.FieldPath})
		default:
			ctr.Env[e.Name] = e.Value
		}
	}
	if t.ConfigMount != "" {
		ctr.Mounts = []kubelet.ConfigMapMount{{Path: t.ConfigMount, ConfigMap: configMap}}
	}
	// A gRPC health probe is a TCP connect in the sim: the EPP accepts
	// on its health port once it serves (router/llmd/epp).
	if port := max(t.ReadinessTCP, t.ReadinessGRPC); port > 0 {
		ctr.ReadinessProbe = &kubelet.Probe{TCPPort: port, Period: c.cfg.ProbePeriod,
			FailureThreshold: readinessFailureThreshold}
	}
	return ctr
}
