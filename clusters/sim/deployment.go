package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim/kubelet"
	"github.com/gpustack/routing-conformance/clusters/sim/operator"
	"github.com/gpustack/routing-conformance/metrics"
)

// deployment is one ModelDeployment and its controller.
type deployment struct {
	c *Cluster
	// name and namespace never change; they are kept outside obj so reading
	// them needs no lock.
	name, namespace string

	mu         sync.Mutex
	obj        *api.ModelDeployment // spec (defaulted) and the last status
	deleting   bool
	events     []kubelet.Event
	views      []operator.RouterView
	observedAt time.Time
	podsSeen   string
	converged  bool

	trigger chan struct{}
	cancel  context.CancelFunc
	done    chan struct{} // closed when the controller has returned
}

var _ clusters.Deployment = (*deployment)(nil)

func newDeployment(c *Cluster, md *api.ModelDeployment) *deployment {
	d := &deployment{c: c, name: md.Metadata.Name, namespace: md.Metadata.Namespace, obj: md,
		trigger: make(chan struct{}, 1), done: make(chan struct{})}
	d.normal("Admitted", fmt.Sprintf("ModelDeployment %s admitted (router %s)", d.key(), routerName(md)))
	return d
}

func routerName(md *api.ModelDeployment) string {
	if md.Spec.Router == nil {
		return "none"
	}
	return md.Spec.Router.Name
}

func (d *deployment) key() string { return d.namespace + "/" + d.name }

func (d *deployment) Name() string      { return d.name }
func (d *deployment) Namespace() string { return d.namespace }

// record keeps a kubelet event about one of this deployment's Pods.
func (d *deployment) record(e kubelet.Event) {
	d.mu.Lock()
	d.events = append(d.events, e)
	d.mu.Unlock()
}

func (d *deployment) normal(reason, msg string) { d.own("Normal", reason, msg) }
func (d *deployment) warn(reason, msg string)   { d.own("Warning", reason, msg) }

func (d *deployment) own(typ, reason, msg string) {
	d.record(kubelet.Event{Time: time.Now(), Namespace: d.namespace, Pod: "", Type: typ,
		Reason: reason, Message: msg})
}

func (d *deployment) notFound() error {
	return fmt.Errorf("modeldeployments.%s %q not found in namespace %q", api.Group, d.name, d.namespace)
}

func (d *deployment) gone() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Object returns a copy of the live object with its status.
func (d *deployment) Object(ctx context.Context) (*api.ModelDeployment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.gone() {
		return nil, d.notFound()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return operator.DeepCopy(d.obj), nil
}

// WaitReady polls status until api.ReadinessGaps finds nothing missing. It
// stops early, as the kube target does, when a router Pod keeps exiting with
// clap's code 2: waiting cannot fix a refused argument.
func (d *deployment) WaitReady(ctx context.Context, poll time.Duration) error {
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	last := "no status observed yet"
	for {
		obj, err := d.Object(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s not ready: %s: %w", d.key(), last, err)
			}
			return err
		}
		gaps := api.ReadinessGaps(obj)
		if len(gaps) == 0 {
			return nil
		}
		last = strings.Join(gaps, "; ")
		if refused := allRefuseArgs(d.currentRouterPods(obj)); refused != "" {
			return fmt.Errorf("%s cannot become Ready: router Pod %s is in CrashLoopBackOff, last exit code 2 (the router refused its arguments; its previous log has the error); still missing: %s", d.key(), refused, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %s: %w", d.key(), last, ctx.Err())
		case <-t.C:
		}
	}
}

// allRefuseArgs names a router Pod when every Pod of the current router
// template refuses its arguments. Pods of an older template do not count:
// right after an edit that fixes the arguments the old Pod still crashes
// while the new one is being created, and waiting resolves that.
func allRefuseArgs(pods []clusters.RouterPod) string {
	if len(pods) == 0 {
		return ""
	}
	for _, p := range pods {
		if !p.RefusedArgs() {
			return ""
		}
	}
	return pods[0].Name
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
	for _, p := range d.c.kube.ListStatus(d.Namespace(), map[string]string{api.LabelInstance: d.Name()}) {
		if _, ok := p.Labels[api.LabelRouter]; ok && !p.Deleting() {
			out = append(out, p)
		}
	}
	return out
}

// OpenAIBaseURL is a ready router Pod's own address (the sim's stand-in for
// a port-forward): http://<routerPodIP>:8081/v1. Without a router it is a
// ready replica of the first role, as the deployment Service would pick.
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
				if p, ok := d.c.kube.Get(d.Namespace(), r.Name); ok && p.Ready {
					return r.URL() + "/v1", nil
				}
			}
		}
		return "", fmt.Errorf("%s has no ready replica of role %s", d.key(), obj.Spec.Roles[0].Name)
	}
	for _, p := range d.routerPods() {
		if p.Ready {
			return "http://" + net.JoinHostPort(p.IP, strconv.Itoa(api.RouterHTTPPort)) + "/v1", nil
		}
	}
	reason := "RouterReady not reported"
	if c := obj.Status.FindCondition(api.ConditionRouterReady); c != nil {
		reason = fmt.Sprintf("RouterReady=%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	return "", fmt.Errorf("%s has no ready router Pod (%s)", d.key(), reason)
}

// RouterLogs returns the router container's log of each live router Pod
// (with a header per Pod when there are several).
func (d *deployment) RouterLogs(ctx context.Context, opts clusters.LogOptions) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	d.mu.Lock()
	ctr := opts.Container
	if ctr == "" {
		ctr = routerContainer(d.obj)
	}
	d.mu.Unlock()
	pods := d.routerPods()
	if len(pods) == 0 {
		return "", fmt.Errorf("%s has no router Pod", d.key())
	}
	var b strings.Builder
	var errs []error
	for _, p := range pods {
		text, err := d.c.kube.Logs(p.Namespace, p.Name, ctr, opts.Previous, opts.Since)
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
	if cs, ok := p.Container(routerContainer(obj)); ok {
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
	s, err := metrics.Scrape(ctx, url, metrics.WithHTTPClient(d.c.http), metrics.WithSource(source))
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
	for _, p := range d.c.kube.ListStatus(d.Namespace(), map[string]string{
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
		out = append(out, clusters.Replica{Name: p.Name, Role: role, Kind: kinds[role], IP: p.IP, Port: serving,
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
// roles[].replicas scales the role.
func (d *deployment) Update(ctx context.Context, mutate func(*api.ModelDeployment)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.gone() {
		return d.notFound()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deleting {
		return fmt.Errorf("%s is being deleted", d.key())
	}
	old := operator.DeepCopy(d.obj)
	next := operator.DeepCopy(d.obj)
	mutate(next)
	if next.Metadata.Name != old.Metadata.Name || next.Metadata.Namespace != old.Metadata.Namespace ||
		next.Metadata.UID != old.Metadata.UID {
		return &clusters.AdmissionError{Field: "metadata", Message: "name, namespace and uid are immutable"}
	}
	if err := operator.Admit(old, next); err != nil {
		return err
	}
	operator.Default(next)
	if err := d.c.runnable(next); err != nil {
		return err
	}
	next.Status = old.Status
	if !reflect.DeepEqual(next.Spec, old.Spec) {
		next.Metadata.Generation = old.Metadata.Generation + 1
		d.converged = false
	}
	rv, _ := strconv.Atoi(old.Metadata.ResourceVersion)
	next.Metadata.ResourceVersion = strconv.Itoa(rv + 1)
	d.obj = next
	d.events = append(d.events, kubelet.Event{Time: time.Now(), Namespace: next.Metadata.Namespace,
		Type: "Normal", Reason: "Updated", Message: fmt.Sprintf("spec updated to generation %d",
			next.Metadata.Generation)})
	d.poke()
	return nil
}

// beginDelete marks the deployment for deletion; the controller then
// deletes its Pods and finishes once they are gone.
func (d *deployment) beginDelete() {
	d.mu.Lock()
	first := !d.deleting
	d.deleting = true
	d.mu.Unlock()
	if first {
		d.normal("Deleting", "ModelDeployment deletion requested")
	}
	d.poke()
}

func (d *deployment) waitGone(ctx context.Context) error {
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s still deleting: %w", d.key(), ctx.Err())
	}
}

// Delete removes the deployment and waits until its Pods are gone.
func (d *deployment) Delete(ctx context.Context) error {
	d.beginDelete()
	return d.waitGone(ctx)
}

// Events returns what happened to the deployment and its Pods, in order.
func (d *deployment) Events() []kubelet.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.events)
	slices.SortStableFunc(out, func(a, b kubelet.Event) int { return a.Time.Compare(b.Time) })
	return out
}

// Cost is not counted yet on the sim (being implemented with the readiness
// rework); it says so instead of reporting zeros.
func (d *deployment) Cost(context.Context) (clusters.Cost, error) {
	return clusters.Cost{}, errors.New("sim: GPU-cost accounting is not implemented yet")
}
