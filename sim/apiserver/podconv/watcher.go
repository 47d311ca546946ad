package podconv

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	listerscorev1 "k8s.io/client-go/listers/core/v1"

	"github.com/gpustack/routing-conformance/sim/proc"
)

// Watcher is the Pods API as a sim program or the sim operator sees it,
// backed by an informer's lister: List reads the lister, Watch ticks on
// every Notify (call it from the informer's event handler).
type Watcher struct {
	pods listerscorev1.PodLister

	mu       sync.Mutex
	watchers map[int]chan struct{}
	next     int
}

var _ proc.PodWatcher = (*Watcher)(nil)

// NewWatcher reads Pods from lister.
func NewWatcher(pods listerscorev1.PodLister) *Watcher {
	return &Watcher{pods: pods, watchers: map[int]chan struct{}{}}
}

// List returns the Pods in namespace ("" = all) matching selector.
func (w *Watcher) List(namespace string, selector map[string]string) []proc.Pod {
	list, err := w.pods.Pods(namespace).List(labels.SelectorFromSet(selector))
	if err != nil {
		return nil
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	out := make([]proc.Pod, 0, len(list))
	for _, p := range list {
		st := FromStatus(p)
		out = append(out, proc.Pod{
			PodInfo: proc.PodInfo{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), IP: st.IP,
				Labels: st.Labels, Annotations: st.Annotations},
			Phase: st.Phase, Ready: st.Ready, Deleting: st.Deleting(),
		})
	}
	return out
}

// Watch ticks after every Notify; the channel holds one pending tick.
func (w *Watcher) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	id := w.next
	w.next++
	w.watchers[id] = ch
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.watchers, id)
		w.mu.Unlock()
	}
}

// Notify ticks every watcher.
func (w *Watcher) Notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
