package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/metrics"
	"github.com/gpustack/routing-conformance/sim/controller"
	"github.com/gpustack/routing-conformance/sim/kubelet"
	"github.com/gpustack/routing-conformance/sim/operator"
)

// deployment is the view of one ModelDeployment that the specs get: it
// reads the stored object and the kubelet's Pods, and hands writes (Update,
// Delete) to the controller after admission, as a client of the API server
// would. It holds no state of its own.
type deployment struct {
	// name and namespace never change.
	name, namespace string
	ctrl            *controller.Controller
	kube            *kubelet.Kubelet
	http            *http.Client
	get             func(ctx context.Context, url string, timeout time.Duration, limit int64) ([]byte, error)
	// admit is the API server's admission of an update (webhook, defaults,
	// and what the sim can run).
	admit func(old, next *api.ModelDeployment) error
	// seed reads an EPP's picker seed by namespace/pod.
	seed func(key string) (uint64, bool)
	// cost counts the engine Pods the kubelet reports (podChanged), as
	// the kube target counts the Pods it watches.
	cost clusters.CostLedger
}

var (
	_ clusters.Deployment   = (*deployment)(nil)
	_ clusters.PickerSeeder = (*deployment)(nil)
)

func (d *deployment) key() string { return d.namespace + "/" + d.name }

func (d *deployment) Name() string      { return d.name }
func (d *deployment) Namespace() string { return d.namespace }

// notFound is the API server's answer for a deleted object (the same text),
// wrapping clusters.ErrNotFound so a wait stops on it.
func (d *deployment) notFound() error {
	return fmt.Errorf("modeldeployments.%s %q %w in namespace %q", api.Group, d.name, clusters.ErrNotFound, d.namespace)
}

// Object returns a copy of the live object with its status.
func (d *deployment) Object(ctx context.Context) (*api.ModelDeployment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.ctrl.Gone() {
		return nil, d.notFound()
	}
	return d.ctrl.Object(), nil
}

// WaitReady waits through clusters.WaitReady, as the kube target does, with
// the sim's hint: every router Pod of the current template refuses its
// arguments. poll <= 0 is 50 ms.
func (d *deployment) WaitReady(ctx context.Context, poll time.Duration) error {
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	return clusters.WaitReady(ctx, clusters.ReadyWait{Namespace: d.namespace, Name: d.name, Get: d.Object,
		Stuck: d.stuck, Rollout: d.rollout, Poll: poll, Router: d})
}

// rollout names what keeps the router rollout from being over: a live
// router Pod of an earlier template (the ReplicaSet's pod-template-hash),
// fewer Pods of the current one than spec.router.replicas, or one of them
// not Ready. Terminating Pods are out of the Service and do not count.
func (d *deployment) rollout(_ context.Context, md *api.ModelDeployment) string {
	if md.Spec.Router == nil {
		return ""
	}
	w, err := operator.RenderRouter(md)
	if err != nil {
		return "" // the operator's RenderFailed condition says it
	}
	return clusters.RolloutGap(md, d.routerPods(), func(p kubelet.PodStatus) (string, bool, bool) {
		return p.Name, p.Labels[operator.LabelPodTemplateHash] == w.TemplateHash, p.Ready
	})
}

// stuck names a router that will never start as configured: every router
// Pod of the current template (the ReplicaSet's pod-template-hash) is
// crash-looping after refusing its arguments: an argv router exits with
// clap's code 2 (docs/routers.md#clap-errors); llm-d's epp with pflag's 2
// or, for flags or a configuration it rejects, 1 (docs/llmd.md). Pods of an
// older template do not count: right after an edit that fixes the arguments
// the old Pod still crashes while the new one is being created, and waiting
// resolves that.
func (d *deployment) stuck(_ context.Context, md *api.ModelDeployment) string {
	pods := d.currentRouterPods(md)
	if len(pods) == 0 {
		return ""
	}
	for _, p := range pods {
		if !refusedArgs(md, p) {
			return ""
		}
	}
	ctr := operator.RouterContainer(md)
	return fmt.Sprintf("router Pod %s is in CrashLoopBackOff, last exit code %d (the %s container refused its arguments or configuration; its previous log has the error)",
		pods[0].Name, *pods[0].LastExitCode, ctr)
}

// refusedArgs: crash-looping, and the last run exited with the code the
// router program uses for arguments or configuration it refuses.
func refusedArgs(md *api.ModelDeployment, p clusters.RouterPod) bool {
	if p.Waiting != kubelet.ReasonCrashLoopBackOff || p.LastExitCode == nil {
		return false
	}
	code := *p.LastExitCode
	if md.Spec.Router != nil && md.Spec.Router.Name == api.RouterLLMD {
		return code == 1 || code == 2
	}
	return code == 2
}

// currentRouterPods are the live router Pods of obj's current template (the
// ReplicaSet's pod-template-hash), as RouterState describes them.
func (d *deployment) currentRouterPods(obj *api.ModelDeployment) []clusters.RouterPod {
	if obj.Spec.Router == nil {
		return nil
	}
	w, err := operator.RenderRouter(obj)
	if err != nil {
		return nil
	}
	var out []clusters.RouterPod
	for _, p := range d.routerPods() {
		if p.Labels[operator.LabelPodTemplateHash] == w.TemplateHash {
			out = append(out, routerPod(obj, p))
		}
	}
	return out
}

// routerPods returns the live (not deleting) router Pods, sorted by name.
func (d *deployment) routerPods() []kubelet.PodStatus {
	var out []kubelet.PodStatus
	for _, p := range d.kube.ListStatus(d.Namespace(), map[string]string{api.LabelInstance: d.Name()}) {
		if _, ok := p.Labels[api.LabelRouter]; ok && !p.Deleting() {
			out = append(out, p)
		}
	}
	return out
}

// OpenAIBaseURL is the <md>-router Service's address, as a client inside a
// cluster uses it: http://<ClusterIP>:8081/v1, stable for the deployment's
// life, each new connection going to a Ready router Pod at random (package
// service). It is an error while the Service has no usable endpoint.
// Without a router it is a ready replica of the first role, as the
// deployment Service would pick.
func (d *deployment) OpenAIBaseURL(ctx context.Context) (string, error) {
	obj, err := d.Object(ctx)
	if err != nil {
		return "", err
	}
	if obj.Spec.Router == nil {
		rs, err := d.Replicas(ctx)
		if err != nil {
			return "", err
		}
		for _, r := range rs {
			if r.Role == obj.Spec.Roles[0].Name {
				if p, ok := d.kube.Get(d.Namespace(), r.Name); ok && p.Ready {
					return r.URL() + "/v1", nil
				}
			}
		}
		return "", fmt.Errorf("%s has no ready replica of role %s", d.key(), obj.Spec.Roles[0].Name)
	}
	url, usable, err := d.ctrl.RouterServiceURL()
	if err == nil && len(usable) > 0 {
		return url + "/v1", nil
	}
	reason := "RouterReady not reported"
	if c := obj.Status.FindCondition(api.ConditionRouterReady); c != nil {
		reason = fmt.Sprintf("RouterReady=%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	if err != nil {
		return "", fmt.Errorf("%w (%s)", err, reason)
	}
	return "", fmt.Errorf("%s: Service %s-router has no ready router Pod behind it (%s)", d.key(), d.name, reason)
}

// RouterLogs returns the router container's log of each live router Pod
// (with a header per Pod when there are several).
func (d *deployment) RouterLogs(ctx context.Context, opts clusters.LogOptions) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	ctr := opts.Container
	if ctr == "" {
		ctr = operator.RouterContainer(d.ctrl.Object())
	}
	pods := d.routerPods()
	if len(pods) == 0 {
		return "", fmt.Errorf("%s has no router Pod", d.key())
	}
	var b strings.Builder
	var errs []error
	for _, p := range pods {
		text, err := d.kube.Logs(p.Namespace, p.Name, ctr, opts.Previous, opts.Since)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(pods) > 1 {
			fmt.Fprintf(&b, "==> pod/%s <==\n", p.Name)
		}
		b.WriteString(text)
	}
	if len(errs) == len(pods) {
		return "", errors.Join(errs...)
	}
	return b.String(), nil
}

// RouterState describes the live router Pods, sorted by name.
func (d *deployment) RouterState(ctx context.Context) ([]clusters.RouterPod, error) {
	obj, err := d.Object(ctx)
	if err != nil {
		return nil, err
	}
	var out []clusters.RouterPod
	for _, p := range d.routerPods() {
		out = append(out, routerPod(obj, p))
	}
	return out, nil
}

func routerPod(obj *api.ModelDeployment, p kubelet.PodStatus) clusters.RouterPod {
	rp := clusters.RouterPod{Name: p.Name, UID: p.UID, IP: p.IP, Ready: p.Ready}
	if cs, ok := p.Container(operator.RouterContainer(obj)); ok {
		rp.Restarts, rp.Waiting = cs.RestartCount, cs.Waiting
		if cs.LastTermination != nil {
			code := cs.LastTermination.ExitCode
			rp.LastExitCode = &code
		}
	}
	return rp
}

// RouterMetrics scrapes :9090/metrics of every live router Pod, merged with
// the Pod name as metrics.SourceLabel.
func (d *deployment) RouterMetrics(ctx context.Context) (metrics.Snapshot, error) {
	pods := d.routerPods()
	if len(pods) == 0 {
		return metrics.Snapshot{}, fmt.Errorf("%s has no router Pod to scrape", d.key())
	}
	var parts []metrics.Snapshot
	for _, p := range pods {
		s, err := d.scrape(ctx, p.Name, p.IP, api.RouterMetricsPort)
		if err != nil {
			return metrics.Snapshot{}, err
		}
		parts = append(parts, s)
	}
	return metrics.Merge(parts...)
}

// scrape reads one Pod's /metrics through package metrics, as the kube
// target does through the Pod proxy; source names the Pod in merged snapshots.
func (d *deployment) scrape(ctx context.Context, source, ip string, port int) (metrics.Snapshot, error) {
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/metrics"
	s, err := metrics.Scrape(ctx, url, metrics.WithHTTPClient(d.http), metrics.WithSource(source))
	if err != nil {
		return metrics.Snapshot{}, fmt.Errorf("scrape pod %s: %w", source, err)
	}
	return s, nil
}

// Replicas lists the live engine replicas (leader Pods), sorted by name.
func (d *deployment) Replicas(ctx context.Context) ([]clusters.Replica, error) {
	obj, err := d.Object(ctx)
	if err != nil {
		return nil, err
	}
	kinds := map[string]string{}
	for _, r := range obj.Spec.Roles {
		kinds[r.Name] = r.RoleKind()
	}
	var out []clusters.Replica
	for _, p := range d.kube.ListStatus(d.Namespace(), map[string]string{
		api.LabelName: api.NameValue, api.LabelInstance: d.Name(), api.LabelMember: "0"}) {
		role, ok := p.Labels[api.LabelComponent]
		if !ok || p.Deleting() {
			continue
		}
		port, _ := strconv.Atoi(p.Annotations[api.AnnotationPromPort])
		serving := port
		for _, r := range obj.Spec.Roles {
			if r.Name == role {
				serving = int(operator.ServingPort(&r))
			}
		}
		out = append(out, clusters.Replica{Name: p.Name, UID: p.UID, Role: role, Kind: kinds[role], IP: p.IP, Port: serving,
			MetricsPort: port})
	}
	return out, nil
}

// EngineMetrics scrapes one replica's /metrics on its metrics port.
func (d *deployment) EngineMetrics(ctx context.Context, r clusters.Replica) (metrics.Snapshot, error) {
	port := r.MetricsPort
	if port == 0 {
		port = r.Port
	}
	return d.scrape(ctx, r.Name, r.IP, port)
}

// Update applies mutate to a copy of the live object and submits it through
// admission. Editing spec.router.extraArgs replaces the router Pod; editing
// roles[].replicas scales the role. A concurrent update in between is
// retried with mutate applied to the newer object, as a client retries on
// conflict.
func (d *deployment) Update(ctx context.Context, mutate func(*api.ModelDeployment)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.ctrl.Gone() {
			return d.notFound()
		}
		old := d.ctrl.Object()
		next := operator.DeepCopy(old)
		mutate(next)
		if next.Metadata.Name != old.Metadata.Name || next.Metadata.Namespace != old.Metadata.Namespace ||
			next.Metadata.UID != old.Metadata.UID {
			return &clusters.AdmissionError{Field: "metadata", Message: "name, namespace and uid are immutable"}
		}
		next.Metadata.ResourceVersion = old.Metadata.ResourceVersion
		if err := d.admit(old, next); err != nil {
			return err
		}
		if err := d.ctrl.Apply(next); !errors.Is(err, controller.ErrConflict) {
			return err
		}
	}
}

// Delete removes the deployment and waits until its Pods are gone.
func (d *deployment) Delete(ctx context.Context) error {
	d.ctrl.Delete()
	return d.waitGone(ctx)
}

func (d *deployment) waitGone(ctx context.Context) error {
	select {
	case <-d.ctrl.Done():
		d.cost.Close(time.Now())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s still deleting: %w", d.key(), ctx.Err())
	}
}

// Events returns what happened to the deployment and its Pods, in order.
func (d *deployment) Events() []kubelet.Event { return d.ctrl.Events() }

// Cost counts the engine Pods the deployment started and those that became
// Ready; after Delete it is final. AcceleratorSeconds stays 0: the sim's
// Pods hold no accelerators.
func (d *deployment) Cost(context.Context) (clusters.Cost, error) {
	select {
	case <-d.ctrl.Done(): // deleted, or the cluster closed
		d.cost.Close(time.Now())
	default:
	}
	return d.cost.Cost(time.Now()), nil
}

// podChanged takes the kubelet's status update of one of d's Pods: the
// controller's router Service follows its router Pods, the ledger its
// engine Pods.
func (d *deployment) podChanged(u kubelet.PodUpdate) {
	d.ctrl.PodChanged(u)
	if !controller.IsEnginePod(u.Pod.Labels) {
		return
	}
	o := clusters.PodObservation{UID: u.Pod.UID, Ready: u.Pod.Ready && !u.Removed}
	if u.Removed {
		o.GoneAt = u.At
	}
	if o.Ready {
		o.ReadySince = u.At
	}
	// Sim Pods request no accelerators: the sim holds none, and its scaled
	// clock would make accelerator-seconds a figure of nothing.
	d.cost.Observe(o)
}

// RouterConfig is the router ConfigMap <md>-router as the operator wrote it
// (llm-d-router only).
func (d *deployment) RouterConfig(ctx context.Context) (map[string]string, error) {
	obj, err := d.Object(ctx)
	if err != nil {
		return nil, err
	}
	name := operator.RouterServiceName(obj)
	if data, ok := d.ctrl.ConfigMap(name); ok {
		return data, nil
	}
	return nil, fmt.Errorf("configmaps %q %w in namespace %q", name, clusters.ErrNotFound, d.namespace)
}

// PickerSeeds maps each live router Pod to its EPP's tie-break seed.
func (d *deployment) PickerSeeds(ctx context.Context) (map[string]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, p := range d.routerPods() {
		if s, ok := d.seed(p.Namespace + "/" + p.Name); ok {
			out[p.Name] = s
		}
	}
	return out, nil
}
