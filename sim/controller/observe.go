package controller

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
)

// observe asks each router Pod for its endpoint view, on its own address.
// Any change of the Pods (a new one, readiness, deletion) asks for a fresh
// look at once.
func (c *Controller) observe(ctx context.Context, md *api.ModelDeployment, routers []kubelet.PodStatus,
	pods string) []operator.RouterView {
	if md.Spec.Router == nil {
		return nil
	}
	c.mu.Lock()
	interval := observeFast
	if c.converged {
		interval = observeSlow
	}
	fresh := time.Since(c.observedAt) < interval && pods == c.podsSeen
	cached := slices.Clone(c.views)
	c.mu.Unlock()
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
			views[i] = c.observeOne(ctx, p)
		}()
	}
	wg.Wait()
	c.mu.Lock()
	c.views, c.observedAt, c.podsSeen = views, time.Now(), pods
	c.mu.Unlock()
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

func (c *Controller) observeOne(ctx context.Context, p kubelet.PodStatus) operator.RouterView {
	v := operator.RouterView{Pod: p.Name, ObservedAt: time.Now()}
	url := "http://" + net.JoinHostPort(p.IP, strconv.Itoa(operator.ObserverPort(p.Labels[api.LabelRouter]))) +
		operator.ObserverPath
	body, err := c.cfg.Get(ctx, url, 500*time.Millisecond, 4<<20)
	if err != nil {
		v.Err = err
		return v
	}
	v.Workers, v.Err = operator.ParseObserver(body)
	return v
}

// publish computes status from what is observed and stores it; hash is the
// pod-template-hash of the router's current template.
func (c *Controller) publish(md *api.ModelDeployment, engines map[string][]kubelet.PodStatus,
	routers []kubelet.PodStatus, views []operator.RouterView, deleting bool, hash string) {
	obs := operator.Observation{Now: time.Now(), Deleting: deleting, RouterViews: views,
		ServingValidity: c.cfg.ServingValidity}
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
	for _, p := range routers {
		ro := operator.RouterPodObservation{Name: p.Name, Ready: p.Ready, Deleting: p.Deleting(),
			UpToDate: p.Labels[operator.LabelPodTemplateHash] == hash}
		if cs, ok := p.Container(operator.RouterContainer(md)); ok {
			ro.Waiting, ro.Restarts = cs.Waiting, cs.RestartCount
			if cs.LastTermination != nil {
				code := cs.LastTermination.ExitCode
				ro.LastExitCode = &code
			}
		}
		obs.RouterPods = append(obs.RouterPods, ro)
	}

	// The spec may have moved while this pass ran; status (its conditions'
	// observedGeneration) is for what was seen.
	c.mu.Lock()
	st := operator.ComputeStatus(md, &c.obj.Status, obs)
	c.obj.Status = st
	converged := md.Spec.Router != nil
	for _, r := range st.Roles {
		if r.Endpoints == nil || r.Endpoints.Serving.State != api.ServingConfirmed ||
			r.Endpoints.Serving.Value == nil || *r.Endpoints.Serving.Value != r.Desired {
			converged = false
		}
	}
	c.converged = converged
	c.mu.Unlock()
	if c.cfg.OnStatus != nil {
		out := operator.DeepCopy(md)
		out.Status = st
		c.cfg.OnStatus(out)
	}
}
