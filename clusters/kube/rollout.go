package kube

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
)

// labelPodTemplateHash is the label the Deployment controller puts on
// every Pod of a ReplicaSet: the hash of the Pod template it runs.
const labelPodTemplateHash = "pod-template-hash"

// routerRevisions knows which router args each revision of the router
// Deployment (its Pods' pod-template-hash) runs, so that a wait after an
// edit can tell the new router Pod from the old one without reading
// Deployments or ReplicaSets (which the suite's RBAC does not grant). The
// suite is the deployment's only writer: it knows the args it created it
// with and each edit it made. The first revision seen after a write whose
// args no known revision runs is that write's; a write back to args a
// known revision runs is that revision again, as the Deployment controller
// reuses the ReplicaSet whose template matches (an edit back after a
// refused value). It is safe for concurrent use.
type routerRevisions struct {
	mu   sync.Mutex
	want string // the spec's router args as last written (argsKey)
	// byHash maps a pod-template-hash to the args its Pods run.
	byHash map[string]string
	// unassigned: the next unknown hash is want's.
	unassigned bool
}

func argsKey(args []string) string { return strings.Join(args, "\x00") }

// wrote records a create or an edit that leaves the router args at args.
func (r *routerRevisions) wrote(args []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want = argsKey(args)
	r.unassigned = true
	for _, a := range r.byHash {
		if a == r.want {
			r.unassigned = false
		}
	}
}

// current reports whether a router Pod of revision hash runs the args last
// written.
func (r *routerRevisions) current(hash string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byHash == nil {
		r.byHash = map[string]string{}
	}
	if a, ok := r.byHash[hash]; ok {
		return a == r.want
	}
	if hash == "" || !r.unassigned {
		return false
	}
	r.byHash[hash], r.unassigned = r.want, false
	return true
}

// observe assigns the revisions of pods, oldest Pod first, so that a new
// revision is told from the ones before it by the Pods that run it.
func (r *routerRevisions) observe(pods []corev1.Pod) {
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for i := range sorted {
		r.current(sorted[i].Labels[labelPodTemplateHash])
	}
}

// rollout is WaitReady's Rollout check: the live router Pods are
// spec.router.replicas Ready Pods of the revision that runs the args last
// written, and nothing else.
func (d *Deployment) rollout(ctx context.Context, md *api.ModelDeployment) string {
	if md.Spec.Router == nil {
		return ""
	}
	pods, err := d.routerPods(ctx)
	if err != nil {
		return "router rollout: " + firstLine(err.Error())
	}
	return clusters.RolloutGap(md, d.currentRouterPods(pods), func(p routerPodRevision) (string, bool, bool) {
		return p.pod.Name, p.current, podReady(p.pod)
	})
}

// routerPodRevision is a live router Pod and whether it runs the args last
// written.
type routerPodRevision struct {
	pod     *corev1.Pod
	current bool
}

// currentRouterPods tells each of pods (live router Pods) whether it runs
// the args last written.
func (d *Deployment) currentRouterPods(pods []corev1.Pod) []routerPodRevision {
	d.revisions.observe(pods)
	out := make([]routerPodRevision, 0, len(pods))
	for i := range pods {
		out = append(out, routerPodRevision{pod: &pods[i], current: d.revisions.current(pods[i].Labels[labelPodTemplateHash])})
	}
	return out
}
