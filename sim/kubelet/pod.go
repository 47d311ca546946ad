package kubelet

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/sim/proc"
)

type pod struct {
	spec         PodSpec
	uid, ip      string
	ips          *ipAllocator // where ip (and privateIP) came from
	created      time.Time
	phase        string
	deletionTime *time.Time
	removed      bool // no longer in Kubelet.pods
	containers   []*container
	events       []Event

	ctx     context.Context // cancelled when the Pod's containers must stop
	cancel  context.CancelFunc
	running sync.WaitGroup // one per container supervisor
	gone    chan struct{}  // closed once the Pod is removed

	lmu       sync.Mutex
	privateIP string

	// faults are the HTTP faults injected into the Pod (InjectHTTPFault).
	faults proc.Faults
	// live are the running container instances, whose sockets a kill
	// closes at once; guarded by Kubelet.mu.
	live map[*instance]bool
	// killed: deleted with a zero grace period (Kill).
	killed bool
}

// container's fields are guarded by Kubelet.mu.
type container struct {
	spec         ContainerSpec
	ready        bool
	started      bool
	running      bool
	runningSince time.Time
	waiting      string
	restarts     int32
	terminated   *Termination
	lastTerm     *Termination
	// current is the running instance's log, or the last one's while the
	// container waits; lastLog belongs to lastTerm (kubectl logs --previous).
	current *logBuffer
	lastLog *logBuffer
}

func (p *pod) statusLocked() PodStatus {
	st := PodStatus{
		Name: p.spec.Name, Namespace: p.spec.Namespace, UID: p.uid, IP: p.ip,
		Labels: maps.Clone(p.spec.Labels), Annotations: maps.Clone(p.spec.Annotations),
		Phase: p.phase, CreationTimestamp: p.created, DeletionTimestamp: p.deletionTime,
	}
	ready := true
	for _, c := range p.containers {
		cs := ContainerStatus{
			Name: c.spec.Name, Ready: c.ready, Started: c.started, RestartCount: c.restarts,
			Running: c.running, Waiting: c.waiting,
		}
		if c.running {
			cs.RunningSince = c.runningSince
		}
		if c.terminated != nil {
			t := *c.terminated
			cs.Terminated = &t
		}
		if c.lastTerm != nil {
			t := *c.lastTerm
			cs.LastTermination = &t
		}
		if !c.ready {
			ready = false
		}
		st.Containers = append(st.Containers, cs)
	}
	st.Ready = ready && p.phase == PhaseRunning
	return st
}

// supervise runs one container for the Pod's life: start, wait for exit,
// record the termination, back off, restart (restartPolicy Always).
func (k *Kubelet) supervise(p *pod, c *container) {
	defer k.wg.Done()
	defer p.running.Done()
	backoff := k.opts.BackoffInitial
	for {
		if p.ctx.Err() != nil {
			k.mu.Lock()
			c.waiting = ""
			k.mu.Unlock()
			return
		}
		prep, err := k.prepare(p, c)
		if err != nil {
			k.mu.Lock()
			changed := c.waiting != ReasonCreateContainerConfigError
			c.waiting = ReasonCreateContainerConfigError
			k.mu.Unlock()
			if changed {
				k.changed(p)
			}
			k.event(p, "Warning", "Failed", "Error: "+err.Error())
			if !sleep(p.ctx, backoff) {
				k.mu.Lock()
				c.waiting = ""
				k.mu.Unlock()
				return
			}
			backoff = min(backoff*2, k.opts.BackoffMax)
			continue
		}
		started := time.Now()
		code, reason := k.runInstance(p, c, started, prep)
		finished := time.Now()

		term := &Termination{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: finished}
		k.mu.Lock()
		c.running, c.ready = false, false
		if p.ctx.Err() != nil {
			c.terminated = term
			c.waiting = ""
			k.mu.Unlock()
			k.changed(p)
			return
		}
		c.lastTerm = term
		c.lastLog = c.current
		c.restarts++
		c.waiting = ReasonCrashLoopBackOff
		k.mu.Unlock()
		k.changed(p)

		if finished.Sub(started) >= k.opts.BackoffReset {
			backoff = k.opts.BackoffInitial
		}
		k.event(p, "Warning", "BackOff", fmt.Sprintf("Back-off %s restarting failed container %s in pod %s_%s",
			backoff, c.spec.Name, p.spec.Name, p.spec.Namespace))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
		}
		backoff = min(backoff*2, k.opts.BackoffMax)
	}
}

// runInstance runs Main once and returns its exit code and termination
// reason. A Main that ignores its cancelled context past the grace period is
// abandoned with exit code 137, as the kubelet would SIGKILL it.
func (k *Kubelet) runInstance(p *pod, c *container, started time.Time, prep prepared) (int32, string) {
	sink := func(stream, text string, t time.Time) {
		if k.opts.LogSink != nil {
			k.opts.LogSink(LogLine{Time: t, Namespace: p.spec.Namespace, Pod: p.spec.Name,
				Container: c.spec.Name, Stream: stream, Text: text})
		}
	}
	logs := newLogBuffer(sink)
	ictx, cancel := context.WithCancel(p.ctx)
	defer cancel()

	inst := &instance{pod: p, conns: map[net.Conn]bool{}, sigkill: make(chan struct{})}
	view := &proc.Container{
		Args:   prep.args,
		Env:    prep.env,
		Files:  prep.files,
		Stdout: streamWriter{logs, "stdout"},
		Stderr: streamWriter{logs, "stderr"},
		Pod: proc.PodInfo{Name: p.spec.Name, Namespace: p.spec.Namespace, UID: p.uid, IP: p.ip,
			Labels: maps.Clone(p.spec.Labels), Annotations: maps.Clone(p.spec.Annotations)},
		Listen: inst.listen,
		Faults: &p.faults,
		Killed: inst.sigkill,
	}
	if c.spec.WatchPods {
		view.Pods = k.Pods()
		if k.opts.PodWatcher != nil {
			view.Pods = k.opts.PodWatcher
		}
	}

	k.mu.Lock()
	if p.live == nil {
		p.live = map[*instance]bool{}
	}
	p.live[inst] = true
	killed := p.killed
	c.current = logs
	c.running, c.runningSince, c.waiting, c.terminated = true, started, "", nil
	c.ready = false
	c.started = c.spec.StartupProbe == nil
	if p.phase == PhasePending {
		p.phase = PhaseRunning
	}
	k.mu.Unlock()
	k.changed(p)
	k.event(p, "Normal", "Started", "Started container "+c.spec.Name)

	probesDone := make(chan struct{})
	go func() {
		defer close(probesDone)
		k.probeLoop(ictx, p, c, cancel)
	}()

	if killed {
		inst.kill() // started after the kill: its sockets die as it opens them
	}
	result := make(chan int32, 1)
	go func() {
		result <- runMain(ictx, c.spec.Main, view)
	}()
	var code int32
	select {
	case code = <-result:
	case <-ictx.Done():
		grace := p.spec.TerminationGracePeriod
		k.mu.Lock()
		if p.killed {
			grace = 0 // SIGKILL: the process is gone, whatever Main does
		}
		k.mu.Unlock()
		t := time.NewTimer(grace)
		select {
		case code = <-result:
			t.Stop()
		case <-t.C:
			inst.markKilled()
			code = 137
			k.event(p, "Warning", "FailedKillPod", fmt.Sprintf(
				"container %s did not return within %s of its context ending; abandoned",
				c.spec.Name, p.spec.TerminationGracePeriod))
		}
	}
	cancel()
	<-probesDone
	inst.closeListeners()
	k.mu.Lock()
	delete(p.live, inst)
	k.mu.Unlock()
	reason := ReasonCompleted
	if code != 0 {
		reason = ReasonError
	}
	return code, reason
}

// runMain calls Main, turning a panic into what the Go runtime does to a
// process: the trace on stderr and exit code 2.
func runMain(ctx context.Context, m proc.Main, c *proc.Container) (code int32) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(c.Stderr, "panic: %v\n\n%s", r, debug.Stack())
			code = 2
		}
	}()
	return int32(m(ctx, c))
}

// instance tracks one container run's listeners, which close when it ends
// (the kernel closes a dead process's sockets), and the connections they
// accepted, which a kill closes too.
type instance struct {
	pod       *pod
	mu        sync.Mutex
	listeners []net.Listener
	conns     map[net.Conn]bool
	closed    bool
	killed    bool
	// sigkill is closed once, by markKilled: proc.Container.Killed.
	sigkill  chan struct{}
	killOnce sync.Once
}

// markKilled closes the instance's Killed channel (once).
func (in *instance) markKilled() { in.killOnce.Do(func() { close(in.sigkill) }) }

func (in *instance) listen(addr string) (net.Listener, error) {
	host, port, err := splitListen(addr)
	if err != nil {
		return nil, err
	}
	ip, err := in.pod.listenHost(host)
	if err != nil {
		return nil, fmt.Errorf("listen tcp %s: %w", addr, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		_ = l.Close()
		return nil, fmt.Errorf("listen tcp %s: container has exited", addr)
	}
	in.listeners = append(in.listeners, l)
	return trackedListener{Listener: l, in: in}, nil
}

// trackedListener records the connections it accepts in its instance.
type trackedListener struct {
	net.Listener
	in *instance
}

func (l trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.in.mu.Lock()
	defer l.in.mu.Unlock()
	if l.in.killed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, in: l.in}
	l.in.conns[tc] = true
	return tc, nil
}

// trackedConn leaves its instance's set when closed.
type trackedConn struct {
	net.Conn
	in   *instance
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.in.mu.Lock()
		delete(c.in.conns, c)
		c.in.mu.Unlock()
	})
	return c.Conn.Close()
}

// kill closes every socket of the instance at once, as the kernel does for
// a SIGKILLed process: listeners and accepted connections (peers see a
// reset or an EOF mid-answer).
func (in *instance) kill() {
	in.markKilled()
	in.mu.Lock()
	in.killed = true
	conns := make([]net.Conn, 0, len(in.conns))
	for c := range in.conns {
		conns = append(conns, c)
	}
	in.mu.Unlock()
	in.closeListeners()
	for _, c := range conns {
		if tc, ok := c.(*trackedConn); ok {
			if raw, ok := tc.Conn.(*net.TCPConn); ok {
				_ = raw.SetLinger(0) // RST, not FIN: nothing is flushed
			}
		}
		_ = c.Close()
	}
}

func (in *instance) closeListeners() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	for _, l := range in.listeners {
		_ = l.Close()
	}
}

// probeLoop runs the startup probe until it passes, then readiness and
// liveness. kill ends the container instance (failed startup or liveness).
func (k *Kubelet) probeLoop(ctx context.Context, p *pod, c *container, kill func()) {
	spec := c.spec
	if sp := spec.StartupProbe; sp != nil {
		failures := 0
		for {
			if ok, msg := k.check(ctx, p, sp); ok {
				break
			} else if ctx.Err() != nil {
				return
			} else {
				failures++
				if failures >= threshold(sp) {
					k.event(p, "Warning", "Unhealthy", "Startup probe failed: "+msg)
					k.event(p, "Normal", "Killing", fmt.Sprintf(
						"Container %s failed startup probe, will be restarted", spec.Name))
					kill()
					return
				}
			}
			if !sleep(ctx, period(sp)) {
				return
			}
		}
		k.mu.Lock()
		c.started = true
		k.mu.Unlock()
		k.changed(p)
	}
	if spec.ReadinessProbe == nil {
		k.setReady(p, c, true)
	}
	if spec.ReadinessProbe == nil && spec.LivenessProbe == nil {
		return
	}
	every := time.Duration(0)
	for _, pr := range []*Probe{spec.ReadinessProbe, spec.LivenessProbe} {
		if pr != nil && (every == 0 || period(pr) < every) {
			every = period(pr)
		}
	}
	readyFails, liveFails := 0, 0
	for {
		if rp := spec.ReadinessProbe; rp != nil {
			if ok, _ := k.check(ctx, p, rp); ok {
				readyFails = 0
				k.setReady(p, c, true)
			} else if ctx.Err() == nil {
				readyFails++
				if readyFails >= threshold(rp) {
					k.setReady(p, c, false)
				}
			}
		}
		if lp := spec.LivenessProbe; lp != nil {
			if ok, msg := k.check(ctx, p, lp); ok {
				liveFails = 0
			} else if ctx.Err() == nil {
				liveFails++
				if liveFails >= threshold(lp) {
					k.event(p, "Warning", "Unhealthy", "Liveness probe failed: "+msg)
					k.event(p, "Normal", "Killing", fmt.Sprintf(
						"Container %s failed liveness probe, will be restarted", spec.Name))
					kill()
					return
				}
			}
		}
		if !sleep(ctx, every) {
			return
		}
	}
}

func (k *Kubelet) setReady(p *pod, c *container, ready bool) {
	k.mu.Lock()
	changed := c.ready != ready && c.running
	if c.running {
		c.ready = ready
	}
	k.mu.Unlock()
	if changed {
		k.changed(p)
	}
}

func (k *Kubelet) check(ctx context.Context, p *pod, pr *Probe) (bool, string) {
	if pr.TCPPort > 0 {
		d := net.Dialer{Timeout: k.opts.ProbeTimeout}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(p.ip, strconv.Itoa(pr.TCPPort)))
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		return true, ""
	}
	url := "http://" + net.JoinHostPort(p.ip, strconv.Itoa(pr.HTTPPort)) + pr.HTTPPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	resp, err := k.probe.Do(req)
	if err != nil {
		return false, err.Error()
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return true, ""
}

func period(p *Probe) time.Duration {
	if p.Period <= 0 {
		return 100 * time.Millisecond
	}
	return p.Period
}

func threshold(p *Probe) int {
	if p.FailureThreshold <= 0 {
		return 3
	}
	return p.FailureThreshold
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
