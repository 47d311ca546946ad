package sim

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters/sim/kubelet"
	"github.com/gpustack/routing-conformance/clusters/sim/operator"
	"github.com/gpustack/routing-conformance/clusters/sim/programs"
)

// Engine probes as the operator renders them (model_deployment_render.go):
// GET /health on the serving port; startup 180 periods, readiness 3,
// liveness 6. Periods are Options.ProbePeriod.
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

// start runs the controller loop in the background.
func (d *deployment) start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() {
		defer close(d.done)
		d.run(ctx)
	}()
}

func (d *deployment) run(ctx context.Context) {
	ticks, stopWatch := d.c.kube.Pods().Watch()
	defer stopWatch()
	t := time.NewTicker(d.c.opts.ResyncPeriod)
	defer t.Stop()
	for {
		if gone := d.reconcile(ctx); gone {
			d.c.forget(d)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-d.trigger:
		case <-ticks:
		case <-t.C:
		}
	}
}

// poke asks the controller for a pass now.
func (d *deployment) poke() {
	select {
	case d.trigger <- struct{}{}:
	default:
	}
}

// ownedPods lists this deployment's Pods: engines (component label) and
// routers (router label).
func (d *deployment) ownedPods(name, namespace string) (engines map[string][]kubelet.PodStatus, routers []kubelet.PodStatus) {
	engines = map[string][]kubelet.PodStatus{}
	for _, p := range d.c.kube.ListStatus(namespace, map[string]string{
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
func (d *deployment) reconcile(ctx context.Context) bool {
	d.mu.Lock()
	md := operator.DeepCopy(d.obj)
	deleting := d.deleting
	d.mu.Unlock()
	ns, name := md.Metadata.Namespace, md.Metadata.Name

	engines, routers := d.ownedPods(name, ns)
	if deleting {
		remaining := len(routers)
		for _, ps := range engines {
			remaining += len(ps)
		}
		for _, ps := range engines {
			for _, p := range ps {
				d.c.kube.Delete(ns, p.Name)
			}
		}
		for _, p := range routers {
			d.c.kube.Delete(ns, p.Name)
		}
		d.publish(md, engines, routers, nil, true)
		return remaining == 0
	}

	for i := range md.Spec.Roles {
		d.reconcileRole(md, &md.Spec.Roles[i], engines[md.Spec.Roles[i].Name])
	}
	for role, ps := range engines {
		if !slices.ContainsFunc(md.Spec.Roles, func(r api.Role) bool { return r.Name == role }) {
			for _, p := range ps {
				d.deletePod(p, "role "+role+" is no longer declared")
			}
		}
	}
	d.reconcileRouter(md, routers)

	engines, routers = d.ownedPods(name, ns)
	views := d.observe(ctx, md, routers, fingerprint(engines, routers))
	d.publish(md, engines, routers, views, false)
	return false
}

func (d *deployment) reconcileRole(md *api.ModelDeployment, role *api.Role, pods []kubelet.PodStatus) {
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
			d.deletePod(p, fmt.Sprintf("role %s scaled to %d replicas", role.Name, desired))
		}
	}
	// Scale up: a free ordinal gets a Pod; one still draining waits (the
	// operator's create gate, so two Pods never share an ordinal).
	for ord := range desired {
		if !occupied[ord] {
			d.createEngine(md, role, ord)
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
			d.deletePod(p, fmt.Sprintf("replica %d of role %s was built from an earlier spec", ord, role.Name))
			return
		}
	}
}

func (d *deployment) createEngine(md *api.ModelDeployment, role *api.Role, ordinal int) {
	w, err := operator.RenderEngine(md, role, ordinal)
	if err != nil {
		d.warn("FailedCreate", fmt.Sprintf("render role %s replica %d: %v", role.Name, ordinal, err))
		return
	}
	var main = d.c.opts.Programs.Command(w.Program)
	if main == nil {
		main = programs.NotFound(w.Program)
	}
	env := d.c.opts.Engine.env()
	for _, e := range w.Env {
		env[e.Name] = e.Value
	}
	period := d.c.opts.ProbePeriod
	ctr := kubelet.ContainerSpec{
		Name: w.Container, Image: w.Image, Command: w.Command, Args: w.Args, Env: env,
		Ports: []int{int(w.Port)}, Main: main,
	}
	if !w.Unmanaged {
		probe := func(period time.Duration, threshold int) *kubelet.Probe {
			return &kubelet.Probe{HTTPPath: "/health", HTTPPort: int(w.Port), Period: period, FailureThreshold: threshold}
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
		PreStopDelay: d.c.opts.PreStopDelay,
	}
	if w.Unmanaged {
		spec.PreStopDelay = 0 // a take-over role gets no drain hook
	}
	d.createPod(spec, "role "+role.Name)
}

func (d *deployment) createPod(spec kubelet.PodSpec, owner string) {
	d.c.own(spec.Namespace, spec.Name, d)
	if _, err := d.c.kube.Create(spec); err != nil {
		d.warn("FailedCreate", fmt.Sprintf("create pod %s for %s: %v", spec.Name, owner, err))
		return
	}
	d.normal("SuccessfulCreate", fmt.Sprintf("Created pod: %s (%s)", spec.Name, owner))
}

func (d *deployment) deletePod(p kubelet.PodStatus, why string) {
	if p.Deleting() {
		return
	}
	if d.c.kube.Delete(p.Namespace, p.Name) {
		d.normal("SuccessfulDelete", fmt.Sprintf("Deleted pod: %s (%s)", p.Name, why))
	}
}

// reconcileRouter is the <md>-router Deployment: a rolling update with the
// apps/v1 defaults (maxSurge 25% rounded up, maxUnavailable 25% rounded
// down), so a one-replica router gets its new Pod first and loses the old
// one once the new one is ready.
func (d *deployment) reconcileRouter(md *api.ModelDeployment, pods []kubelet.PodStatus) {
	if md.Spec.Router == nil {
		for _, p := range pods {
			d.deletePod(p, "spec.router was removed")
		}
		return
	}
	w, err := operator.RenderRouter(md)
	if err != nil {
		d.warn("RenderFailed", err.Error())
		return
	}
	desired := int(md.Spec.Router.RouterReplicas())
	surge := int(math.Ceil(float64(desired) * 0.25))
	unavailable := int(math.Floor(float64(desired) * 0.25))
	if surge == 0 && unavailable == 0 {
		surge = 1
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
		d.deletePod(last, fmt.Sprintf("router scaled to %d replicas", desired))
		current = current[:len(current)-1]
		if last.Ready {
			readyCurrent--
		}
	}
	for len(current) < desired && len(current)+len(old) < desired+surge {
		d.createRouter(md, w)
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
		d.deletePod(p, "router template changed")
		if p.Ready {
			readyOld--
		}
	}
}

func (d *deployment) createRouter(md *api.ModelDeployment, w operator.RouterWorkload) {
	main := d.c.opts.Programs.Command(w.Command)
	if main == nil {
		main = programs.NotFound(w.Command)
	}
	spec := kubelet.PodSpec{
		Name:        kubelet.GenerateName(w.Name + "-" + w.TemplateHash + "-"),
		Namespace:   md.Metadata.Namespace,
		Labels:      maps.Clone(w.Labels),
		Annotations: maps.Clone(w.Annotations),
		Containers: []kubelet.ContainerSpec{{
			Name: w.Container, Image: w.Image, Command: append(slices.Clone(w.Command), w.Args...),
			Args: slices.Clone(w.Args), Env: map[string]string{},
			Ports: []int{api.RouterHTTPPort, api.RouterMetricsPort}, Main: main, WatchPods: true,
			ReadinessProbe: &kubelet.Probe{TCPPort: api.RouterHTTPPort, Period: d.c.opts.ProbePeriod,
				FailureThreshold: readinessFailureThreshold},
		}},
	}
	d.createPod(spec, "router "+md.Spec.Router.Name)
}

// observe asks each router Pod for its endpoint view, on its own address.
// Any change of the Pods (a new one, readiness, deletion) asks for a fresh
// look at once.
func (d *deployment) observe(ctx context.Context, md *api.ModelDeployment, routers []kubelet.PodStatus,
	pods string) []operator.RouterView {
	if md.Spec.Router == nil {
		return nil
	}
	d.mu.Lock()
	interval := observeFast
	if d.converged {
		interval = observeSlow
	}
	fresh := time.Since(d.observedAt) < interval && pods == d.podsSeen
	cached := slices.Clone(d.views)
	d.mu.Unlock()
	if fresh {
		return cached
	}

	var live []kubelet.PodStatus
	for _, p := range routers {
		if !p.Deleting() {
			live = append(live, p)
		}
	}
	views := make([]operator.RouterView, len(live))
	var wg sync.WaitGroup
	for i, p := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[i] = d.observeOne(ctx, p)
		}()
	}
	wg.Wait()
	d.mu.Lock()
	d.views, d.observedAt, d.podsSeen = views, time.Now(), pods
	d.mu.Unlock()
	return views
}

// fingerprint summarises the Pods' identities and readiness.
func fingerprint(engines map[string][]kubelet.PodStatus, routers []kubelet.PodStatus) string {
	var b strings.Builder
	add := func(p kubelet.PodStatus) {
		fmt.Fprintf(&b, "%s/%t/%t;", p.UID, p.Ready, p.Deleting())
	}
	for _, role := range slices.Sorted(maps.Keys(engines)) {
		for _, p := range engines[role] {
			add(p)
		}
	}
	for _, p := range routers {
		add(p)
	}
	return b.String()
}

func (d *deployment) observeOne(ctx context.Context, p kubelet.PodStatus) operator.RouterView {
	v := operator.RouterView{Pod: p.Name, ObservedAt: time.Now()}
	url := "http://" + net.JoinHostPort(p.IP, strconv.Itoa(api.RouterHTTPPort)) + operator.ObserverPath
	body, err := d.c.get(ctx, url, 500*time.Millisecond, 4<<20)
	if err != nil {
		v.Err = err
		return v
	}
	v.Workers, v.Err = operator.ParseObserver(body)
	return v
}

// publish computes status from what is observed and stores it.
func (d *deployment) publish(md *api.ModelDeployment, engines map[string][]kubelet.PodStatus,
	routers []kubelet.PodStatus, views []operator.RouterView, deleting bool) {
	obs := operator.Observation{Now: time.Now(), Deleting: deleting, RouterViews: views,
		ServingValidity: d.c.opts.ServingValidity}
	for i := range md.Spec.Roles {
		role := &md.Spec.Roles[i]
		ro := operator.RoleObservation{Name: role.Name}
		for _, p := range engines[role.Name] {
			ord, _ := strconv.Atoi(p.Labels[api.LabelOrdinal])
			w, err := operator.RenderEngine(md, role, ord)
			ro.Pods = append(ro.Pods, operator.EnginePodObservation{
				Name: p.Name, IP: p.IP, Ready: p.Ready, Deleting: p.Deleting(),
				UpToDate: err == nil && p.Annotations[operator.AnnotationPodSpecHash] == w.PodSpecHash,
			})
		}
		obs.Roles = append(obs.Roles, ro)
	}
	var hash string
	if md.Spec.Router != nil {
		if w, err := operator.RenderRouter(md); err == nil {
			hash = w.TemplateHash
		}
	}
	for _, p := range routers {
		rp := routerPod(md, p) // the router container's state as RouterState reports it
		obs.RouterPods = append(obs.RouterPods, operator.RouterPodObservation{Name: p.Name, Ready: p.Ready,
			Deleting: p.Deleting(), UpToDate: p.Labels[operator.LabelPodTemplateHash] == hash,
			Waiting: rp.Waiting, Restarts: rp.Restarts, LastExitCode: rp.LastExitCode})
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	st := operator.ComputeStatus(md, &d.obj.Status, obs)
	// The spec may have moved while this pass ran; status is for what was seen.
	st.ObservedGeneration = md.Metadata.Generation
	d.obj.Status = st
	converged := md.Spec.Router != nil
	for _, r := range st.Roles {
		if r.Endpoints == nil || r.Endpoints.Serving.State != api.ServingConfirmed ||
			r.Endpoints.Serving.Value == nil || *r.Endpoints.Serving.Value != r.Desired {
			converged = false
		}
	}
	d.converged = converged
}

func routerContainer(md *api.ModelDeployment) string {
	if md.Spec.Router != nil && md.Spec.Router.Name == api.RouterLLMD {
		return api.ContainerEPP
	}
	return api.ContainerRouter
}
