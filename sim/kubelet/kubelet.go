// Package kubelet runs simulated Pods: each container is a proc.Main in a
// goroutine with its own context, log streams and loopback Pod IP, supervised
// as a kubelet would (restartPolicy Always with CrashLoopBackOff, restart
// counts, last termination, startup/readiness/liveness probes, graceful
// deletion with a deletionTimestamp phase) and visible to programs through a
// proc.PodWatcher.
//
// Times are scaled down from a real kubelet so that a whole suite runs in
// seconds: the restart back-off starts at 50 ms (10 s on a node), doubles to
// 1 s (300 s) and resets after 3 s of running (10 min); probes run every
// 50–100 ms (10 s) with the operator's failure thresholds. Options override
// every one of them.
package kubelet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/gpustack/routing-conformance/sim/proc"
)

// Pod phases (core/v1).
const (
	PhasePending   = "Pending"
	PhaseRunning   = "Running"
	PhaseSucceeded = "Succeeded"
)

// Container waiting reasons and termination reasons (core/v1, kubelet).
const (
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	ReasonContainerCreate  = "ContainerCreating"
	ReasonError            = "Error"
	ReasonCompleted        = "Completed"
)

// Defaults for Options (see the package comment for the scale).
const (
	DefaultBackoffInitial = 50 * time.Millisecond
	DefaultBackoffMax     = time.Second
	DefaultBackoffReset   = 3 * time.Second
	DefaultProbeTimeout   = time.Second
	DefaultGracePeriod    = 2 * time.Second
)

// Options tune the kubelet. Zero values take the defaults above.
type Options struct {
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// BackoffReset is how long a container must run before its back-off
	// starts again from BackoffInitial.
	BackoffReset time.Duration
	ProbeTimeout time.Duration
	// LogSink, if set, receives every line every container writes.
	LogSink func(LogLine)
	// EventSink, if set, receives every event the kubelet records.
	EventSink func(Event)
	// ConfigMaps, if set, looks up a ConfigMap's data for containers' env
	// sources and volumes; without it every reference is missing.
	ConfigMaps func(namespace, name string) (map[string]string, bool)
	// StatusSink, if set, receives a Pod's status after every change the
	// kubelet makes to it (created, a container started or stopped,
	// readiness, deletion requested, removed), one call at a time and in
	// order, as a watch on the API server delivers them. It must not call
	// the kubelet.
	StatusSink func(PodUpdate)
	// PodCIDR, if set, is an IPv4 /16 the Pod IPs come from (its first /24
	// is left for the node), e.g. 10.244.0.0/16 inside a private network
	// namespace whose loopback carries it; default: a loopback /16.
	PodCIDR string
	// PodWatcher, if set, is the Pods API a container with WatchPods gets
	// (e.g. one backed by a real API server); default: this kubelet's Pods.
	PodWatcher proc.PodWatcher
	// NodeName names the node in the Scheduled event (default "sim-node").
	NodeName string
}

// PodUpdate is one change of a Pod, for Options.StatusSink.
type PodUpdate struct {
	// Pod is the status right after the change.
	Pod PodStatus
	// Removed: the Pod no longer exists (a watch's DELETED).
	Removed bool
	// At is when the change was made.
	At time.Time
}

// Event is a Kubernetes event about a Pod.
type Event struct {
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	Type      string    `json:"type"` // Normal or Warning
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
}

// Kubelet runs Pods. It is safe for concurrent use.
type Kubelet struct {
	opts  Options
	probe *http.Client
	ips   *ipAllocator
	// ipErr is a bad Options.PodCIDR, returned by every Create.
	ipErr error

	mu       sync.Mutex
	pods     map[string]*pod
	stopping bool
	wg       sync.WaitGroup

	// smu orders StatusSink calls.
	smu sync.Mutex

	wmu      sync.Mutex
	watchers map[int]chan struct{}
	nextW    int
}

// New returns a kubelet with no Pods.
func New(opts Options) *Kubelet {
	if opts.BackoffInitial <= 0 {
		opts.BackoffInitial = DefaultBackoffInitial
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	if opts.BackoffReset <= 0 {
		opts.BackoffReset = DefaultBackoffReset
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     2 * time.Second,
		DisableCompression:  true,
		Proxy:               nil,
	}
	if opts.NodeName == "" {
		opts.NodeName = "sim-node"
	}
	k := &Kubelet{
		opts:     opts,
		probe:    &http.Client{Transport: tr, Timeout: opts.ProbeTimeout},
		ips:      podIPs,
		pods:     map[string]*pod{},
		watchers: map[int]chan struct{}{},
	}
	if opts.PodCIDR != "" {
		k.ips, k.ipErr = newCIDRAllocator(opts.PodCIDR)
	}
	return k
}

// PodSpec is what a Pod runs.
type PodSpec struct {
	// Name must be unique in the namespace; use GenerateName for a suffix.
	Name      string
	Namespace string
	// UID is the Pod's UID when an API server assigned one; empty: a
	// fresh one (NewUID).
	UID         string
	Labels      map[string]string
	Annotations map[string]string
	Containers  []ContainerSpec
	// PreStopDelay is how long a deleted Pod keeps running with its
	// deletionTimestamp set before its containers are told to stop: the
	// window in which routers drop it (the operator's drain hook).
	PreStopDelay time.Duration
	// TerminationGracePeriod bounds how long a container may take to return
	// after its context is cancelled (default DefaultGracePeriod).
	TerminationGracePeriod time.Duration
}

// ContainerSpec is one container.
type ContainerSpec struct {
	Name  string
	Image string
	// Command is the argv as a Pod spec shows it (program and arguments).
	Command []string
	// Args is what Main receives (argv without the program).
	Args []string
	Env  map[string]string
	// EnvFrom are env entries resolved at each start (ConfigMap keys and
	// downward-API fields); they override Env. Args are then expanded:
	// $(VAR) takes the value of VAR in the resolved env.
	EnvFrom []EnvSource
	// Mounts are ConfigMap volumes, read at each start; the program sees
	// them as proc.Container.Files.
	Mounts []ConfigMapMount
	// Ports are the container ports; the Pod IP is chosen so they are free.
	Ports []int
	Main  proc.Main
	// WatchPods gives the program a proc.PodWatcher (routers).
	WatchPods      bool
	StartupProbe   *Probe
	ReadinessProbe *Probe
	LivenessProbe  *Probe
}

// Probe is a TCP connect (TCPPort) or an HTTP GET (HTTPPath on HTTPPort).
type Probe struct {
	TCPPort          int
	HTTPPath         string
	HTTPPort         int
	Period           time.Duration
	FailureThreshold int
}

func (p *Probe) String() string {
	period := p.Period
	if p.TCPPort > 0 {
		return fmt.Sprintf("tcp-socket :%d period=%s #failure=%d", p.TCPPort, period, p.FailureThreshold)
	}
	return fmt.Sprintf("http-get http://:%d%s period=%s #failure=%d", p.HTTPPort, p.HTTPPath, period,
		p.FailureThreshold)
}

// Termination is a container's last terminated state.
type Termination struct {
	ExitCode   int32     `json:"exitCode"`
	Reason     string    `json:"reason"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

// ContainerStatus is one container's observable state.
type ContainerStatus struct {
	Name         string    `json:"name"`
	Ready        bool      `json:"ready"`
	Started      bool      `json:"started"`
	RestartCount int32     `json:"restartCount"`
	Running      bool      `json:"running"`
	RunningSince time.Time `json:"runningSince,omitzero"`
	// Waiting is the waiting reason (e.g. CrashLoopBackOff), "" otherwise.
	Waiting string `json:"waiting,omitempty"`
	// Terminated is set while the container is stopped for good.
	Terminated *Termination `json:"terminated,omitempty"`
	// LastTermination is the previous instance's end (lastState.terminated).
	LastTermination *Termination `json:"lastTermination,omitempty"`
}

// PodStatus is a snapshot of one Pod.
type PodStatus struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	UID               string            `json:"uid"`
	IP                string            `json:"ip"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Phase             string            `json:"phase"`
	Ready             bool              `json:"ready"`
	CreationTimestamp time.Time         `json:"creationTimestamp"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
	Containers        []ContainerStatus `json:"containers"`
}

// Deleting reports whether the Pod has a deletionTimestamp.
func (s PodStatus) Deleting() bool { return s.DeletionTimestamp != nil }

// Container returns the named container's status.
func (s PodStatus) Container(name string) (ContainerStatus, bool) {
	for _, c := range s.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return ContainerStatus{}, false
}

// ErrStopping is returned by Create once Stop has been called.
var ErrStopping = errors.New("kubelet is stopping")

// Create starts a Pod and returns its status. The Pod gets a fresh UID and
// its own loopback IP; its containers start right away.
func (k *Kubelet) Create(spec PodSpec) (PodStatus, error) {
	if spec.Name == "" || spec.Namespace == "" {
		return PodStatus{}, fmt.Errorf("create pod: name and namespace are required")
	}
	if len(spec.Containers) == 0 {
		return PodStatus{}, fmt.Errorf("create pod %s/%s: no containers", spec.Namespace, spec.Name)
	}
	for _, c := range spec.Containers {
		if c.Main == nil {
			return PodStatus{}, fmt.Errorf("create pod %s/%s: container %q has no program", spec.Namespace,
				spec.Name, c.Name)
		}
	}
	if spec.TerminationGracePeriod <= 0 {
		spec.TerminationGracePeriod = DefaultGracePeriod
	}
	var ports []int
	for _, c := range spec.Containers {
		ports = append(ports, c.Ports...)
	}
	if k.ipErr != nil {
		return PodStatus{}, k.ipErr
	}
	ip, err := k.ips.allocate(ports)
	if err != nil {
		return PodStatus{}, err
	}
	uid := spec.UID
	if uid == "" {
		uid = NewUID()
	}

	ctx, cancel := context.WithCancel(context.Background())
	p := &pod{
		spec:    spec,
		uid:     uid,
		ips:     k.ips,
		ip:      ip,
		created: time.Now(),
		phase:   PhasePending,
		ctx:     ctx,
		cancel:  cancel,
		gone:    make(chan struct{}),
	}
	p.spec.Labels = maps.Clone(spec.Labels)
	p.spec.Annotations = maps.Clone(spec.Annotations)
	for i := range spec.Containers {
		p.containers = append(p.containers, &container{spec: spec.Containers[i], waiting: ReasonContainerCreate})
	}

	key := spec.Namespace + "/" + spec.Name
	k.mu.Lock()
	if k.stopping {
		k.mu.Unlock()
		cancel()
		k.ips.release(ip)
		return PodStatus{}, ErrStopping
	}
	if _, exists := k.pods[key]; exists {
		k.mu.Unlock()
		cancel()
		k.ips.release(ip)
		return PodStatus{}, fmt.Errorf("pods %q already exists", spec.Name)
	}
	k.pods[key] = p
	k.wg.Add(len(p.containers))
	p.running.Add(len(p.containers))
	st := p.statusLocked()
	k.mu.Unlock()

	// Scheduled before any container's events, as the scheduler's comes
	// before the kubelet's (it raced the containers' Started).
	k.event(p, "Normal", "Scheduled", "Successfully assigned "+key+" to "+k.opts.NodeName)
	for _, c := range p.containers {
		go k.supervise(p, c)
	}
	k.changed(p)
	return st, nil
}

// Delete sets the Pod's deletionTimestamp and stops it in the background:
// after PreStopDelay its containers' contexts are cancelled, then the Pod
// disappears. It returns false if the Pod does not exist.
func (k *Kubelet) Delete(namespace, name string) bool {
	k.mu.Lock()
	p := k.pods[namespace+"/"+name]
	if p == nil {
		k.mu.Unlock()
		return false
	}
	if p.deletionTime != nil {
		k.mu.Unlock()
		return true
	}
	now := time.Now()
	p.deletionTime = &now
	stopping := k.stopping
	k.wg.Add(1)
	k.mu.Unlock()
	k.changed(p)
	go k.terminate(p, stopping)
	return true
}

// Kill deletes the Pod with a zero grace period, as `kubectl delete pod
// --grace-period=0 --force` and an OOM kill of every container do: no
// pre-stop hook, every socket of the Pod closed at once (in-flight
// exchanges are cut), the containers abandoned with exit code 137 if they
// do not return at once. It returns false if the Pod does not exist.
func (k *Kubelet) Kill(namespace, name string) bool {
	k.mu.Lock()
	p := k.pods[namespace+"/"+name]
	if p == nil {
		k.mu.Unlock()
		return false
	}
	p.killed = true
	insts := make([]*instance, 0, len(p.live))
	for in := range p.live {
		insts = append(insts, in)
	}
	first := p.deletionTime == nil
	if first {
		now := time.Now()
		p.deletionTime = &now
		k.wg.Add(1)
	}
	k.mu.Unlock()
	for _, in := range insts {
		in.kill()
	}
	k.event(p, "Warning", "Killing", "Pod deleted with a zero grace period: every container killed")
	if first {
		k.changed(p)
		go k.terminate(p, true)
	} else {
		p.cancel() // an earlier graceful delete may still be in its pre-stop wait
	}
	return true
}

// InjectHTTPFault arms f on the Pod's HTTP serving until lift is called
// (see proc.HTTPFault); the Pod's programs answer through it.
func (k *Kubelet) InjectHTTPFault(namespace, name string, f proc.HTTPFault) (lift func(), err error) {
	k.mu.Lock()
	p := k.pods[namespace+"/"+name]
	k.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("pods %q not found in namespace %q", name, namespace)
	}
	lift = p.faults.Inject(f)
	k.event(p, "Warning", "FaultInjected", describeFault(f))
	return lift, nil
}

func describeFault(f proc.HTTPFault) string {
	what := fmt.Sprintf("answers %d", f.Status)
	if f.Hang {
		what = "never answers"
	}
	path := f.PathPrefix
	if path == "" {
		path = "/"
	}
	return fmt.Sprintf("HTTP on port %d under %s %s", f.Port, path, what)
}

// AllocateAddress reserves a loopback address of the Pod IP range on which
// every port in ports is free (for a Service's ClusterIP); ReleaseAddress
// gives it back.
func AllocateAddress(ports []int) (string, error) { return podIPs.allocate(ports) }

// ReleaseAddress gives back an address from AllocateAddress.
func ReleaseAddress(ip string) { podIPs.release(ip) }

func (k *Kubelet) terminate(p *pod, fast bool) {
	defer k.wg.Done()
	if d := p.spec.PreStopDelay; d > 0 && !fast {
		t := time.NewTimer(d)
		<-t.C
	}
	for _, c := range p.containers {
		k.event(p, "Normal", "Killing", "Stopping container "+c.spec.Name)
	}
	p.cancel()
	p.running.Wait()

	k.mu.Lock()
	delete(k.pods, p.spec.Namespace+"/"+p.spec.Name)
	p.phase = PhaseSucceeded
	p.removed = true
	k.mu.Unlock()
	p.ips.release(p.ip)
	p.ips.release(p.privateIP)
	close(p.gone)
	k.changed(p)
}

// WaitGone blocks until the Pod no longer exists or ctx ends.
func (k *Kubelet) WaitGone(ctx context.Context, namespace, name string) error {
	k.mu.Lock()
	p := k.pods[namespace+"/"+name]
	k.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.gone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pod %s/%s still terminating: %w", namespace, name, ctx.Err())
	}
}

// Get returns one Pod's status.
func (k *Kubelet) Get(namespace, name string) (PodStatus, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.pods[namespace+"/"+name]
	if p == nil {
		return PodStatus{}, false
	}
	return p.statusLocked(), true
}

// ListStatus returns the Pods in namespace ("" = all) whose labels include
// every pair in selector, sorted by name.
func (k *Kubelet) ListStatus(namespace string, selector map[string]string) []PodStatus {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []PodStatus
	for _, p := range k.pods {
		if (namespace == "" || p.spec.Namespace == namespace) && matches(p.spec.Labels, selector) {
			out = append(out, p.statusLocked())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pods is the Kubernetes API as a router sees it.
func (k *Kubelet) Pods() proc.PodWatcher { return watcher{k} }

type watcher struct{ k *Kubelet }

func (w watcher) List(namespace string, selector map[string]string) []proc.Pod {
	var out []proc.Pod
	for _, s := range w.k.ListStatus(namespace, selector) {
		out = append(out, proc.Pod{
			PodInfo: proc.PodInfo{Name: s.Name, Namespace: s.Namespace, UID: s.UID, IP: s.IP,
				Labels: s.Labels, Annotations: s.Annotations},
			Phase:    s.Phase,
			Ready:    s.Ready,
			Deleting: s.Deleting(),
		})
	}
	return out
}

func (w watcher) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.k.wmu.Lock()
	id := w.k.nextW
	w.k.nextW++
	w.k.watchers[id] = ch
	w.k.wmu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.k.wmu.Lock()
			delete(w.k.watchers, id)
			w.k.wmu.Unlock()
		})
	}
}

// changed reports a change of p: its status to the StatusSink, then a tick
// to every watcher.
func (k *Kubelet) changed(p *pod) {
	if k.opts.StatusSink != nil {
		k.smu.Lock()
		k.mu.Lock()
		u := PodUpdate{Pod: p.statusLocked(), Removed: p.removed, At: time.Now()}
		k.mu.Unlock()
		k.opts.StatusSink(u)
		k.smu.Unlock()
	}
	k.notify()
}

// notify wakes every watcher; a full channel already has a pending tick.
func (k *Kubelet) notify() {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	for _, ch := range k.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Logs returns a container's log as kubectl logs would: the running
// instance (or, while the container waits to restart, the one that just
// ended), or with previous the instance of lastState.terminated; since drops
// lines written earlier.
func (k *Kubelet) Logs(namespace, name, containerName string, previous bool, since time.Time) (string, error) {
	k.mu.Lock()
	p := k.pods[namespace+"/"+name]
	if p == nil {
		k.mu.Unlock()
		return "", fmt.Errorf("pods %q not found", name)
	}
	var c *container
	var names []string
	for _, x := range p.containers {
		names = append(names, x.spec.Name)
		if x.spec.Name == containerName || (containerName == "" && len(p.containers) == 1) {
			c = x
		}
	}
	if c == nil {
		k.mu.Unlock()
		return "", fmt.Errorf("container %s is not valid for pod %s; choose one of: [%s]", containerName, name,
			strings.Join(names, " "))
	}
	buf := c.current
	if previous {
		buf = c.lastLog
		if buf == nil {
			k.mu.Unlock()
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", c.spec.Name, name)
		}
	}
	k.mu.Unlock()
	return buf.text(since), nil
}

// Events returns the events recorded for one Pod.
func (k *Kubelet) Events(namespace, name string) []Event {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.pods[namespace+"/"+name]; p != nil {
		return slices.Clone(p.events)
	}
	return nil
}

// Stop deletes every Pod without the pre-stop delay and waits until all
// containers have returned (or ctx ends).
func (k *Kubelet) Stop(ctx context.Context) error {
	k.mu.Lock()
	k.stopping = true
	var keys [][2]string
	for _, p := range k.pods {
		keys = append(keys, [2]string{p.spec.Namespace, p.spec.Name})
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.Delete(key[0], key[1])
	}
	done := make(chan struct{})
	go func() {
		k.wg.Wait()
		close(done)
	}()
	defer k.probe.CloseIdleConnections()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kubelet stop: containers still running: %w", ctx.Err())
	}
}

func (k *Kubelet) event(p *pod, typ, reason, msg string) {
	e := Event{Time: time.Now(), Namespace: p.spec.Namespace, Pod: p.spec.Name, Type: typ, Reason: reason,
		Message: msg}
	k.mu.Lock()
	p.events = append(p.events, e)
	k.mu.Unlock()
	if k.opts.EventSink != nil {
		k.opts.EventSink(e)
	}
}

// GenerateName appends the API server's 5-character random suffix
// (names.SimpleNameGenerator).
func GenerateName(prefix string) string { return prefix + utilrand.String(5) }

// NewUID returns a random RFC 4122 version 4 UUID, as the API server assigns.
func NewUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// listenHost maps the host a program binds to an address of its Pod: every
// interface, "" or the Pod IP is the Pod IP; loopback is a private address
// nothing else knows, as a Pod's own lo is unreachable from other Pods.
func (p *pod) listenHost(host string) (string, error) {
	switch host {
	case "", "0.0.0.0", "::", p.ip:
		return p.ip, nil
	case "127.0.0.1", "localhost", "::1":
		return p.loopback()
	}
	return "", fmt.Errorf("bind: cannot assign requested address %s (pod %s has %s)", host, p.spec.Name, p.ip)
}

func (p *pod) loopback() (string, error) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.privateIP == "" {
		ip, err := p.ips.allocate(nil)
		if err != nil {
			return "", err
		}
		p.privateIP = ip
	}
	return p.privateIP, nil
}

func splitListen(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("listen %q: %w", addr, err)
	}
	return strings.Trim(host, "[]"), port, nil
}
