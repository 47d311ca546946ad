package kubelet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpustack/routing-conformance/sim/proc"
	"github.com/gpustack/routing-conformance/sim/simtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newKubelet(t *testing.T, opts Options) *Kubelet {
	t.Helper()
	k := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return k
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func podSpec(name string, m proc.Main, env map[string]string) PodSpec {
	return PodSpec{Name: name, Namespace: "ns", Labels: map[string]string{"app": "t"},
		Containers: []ContainerSpec{{Name: "main", Main: m, Env: env, Ports: []int{8000}}}}
}

func engineSpec(name string, env map[string]string) PodSpec {
	s := podSpec(name, simtest.Engine, env)
	s.Containers[0].Args = []string{"serve", "m", "--host", "0.0.0.0", "--port", "8000"}
	s.Containers[0].StartupProbe = &Probe{HTTPPath: "/health", HTTPPort: 8000, Period: 10 * time.Millisecond,
		FailureThreshold: 500}
	s.Containers[0].ReadinessProbe = &Probe{HTTPPath: "/health", HTTPPort: 8000, Period: 20 * time.Millisecond,
		FailureThreshold: 3}
	return s
}

func TestPodsGetDistinctLoopbackAddresses(t *testing.T) {
	k := newKubelet(t, Options{})
	seen := map[string]bool{}
	for i := range 5 {
		st, err := k.Create(engineSpec(fmt.Sprintf("e%d", i), nil))
		if err != nil {
			t.Fatal(err)
		}
		if seen[st.IP] || !strings.HasPrefix(st.IP, "127.") || strings.HasPrefix(st.IP, "127.0.") {
			t.Fatalf("IP %s reused or outside 127.x (x>0)", st.IP)
		}
		seen[st.IP] = true
	}
	for i := range 5 {
		name := fmt.Sprintf("e%d", i)
		eventually(t, 5*time.Second, name+" ready", func() bool { s, _ := k.Get("ns", name); return s.Ready })
		s, _ := k.Get("ns", name)
		resp, err := http.Get("http://" + s.IP + ":8000/health")
		if err != nil {
			t.Fatalf("every replica keeps port 8000 on its own address: %v", err)
		}
		_ = resp.Body.Close()
	}
}

func TestAllocatorSkipsAddressesInUse(t *testing.T) {
	a := newIPAllocator(12345)
	first := fmt.Sprintf("127.%d.0.1", a.second)
	l, err := net.Listen("tcp", first+":8081")
	if err != nil {
		t.Skipf("cannot bind %s: %v", first, err)
	}
	defer l.Close()
	ip, err := a.allocate([]int{8081})
	if err != nil {
		t.Fatal(err)
	}
	if ip == first {
		t.Fatalf("allocated %s whose port 8081 is taken by another process", ip)
	}
	if a.second != 1+12345%254 {
		t.Fatalf("second octet derives from the PID")
	}
}

func TestListenMapsWildcardToPodIP(t *testing.T) {
	k := newKubelet(t, Options{})
	got := make(chan [3]string, 1)
	m := func(ctx context.Context, c *proc.Container) int {
		var addrs [3]string
		for i, a := range []string{"0.0.0.0:8000", ":9000", "127.0.0.1:7000"} {
			l, err := c.Listen(a)
			if err != nil {
				addrs[i] = err.Error()
				continue
			}
			addrs[i] = l.Addr().String()
			defer l.Close()
		}
		if _, err := c.Listen("10.1.2.3:80"); err == nil {
			addrs[0] = "binding a foreign address must fail"
		}
		got <- addrs
		<-ctx.Done()
		return 0
	}
	st, err := k.Create(podSpec("p", m, nil))
	if err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a[0] != st.IP+":8000" || a[1] != st.IP+":9000" {
		t.Fatalf("wildcard binds the Pod IP %s: %v", st.IP, a)
	}
	if strings.HasPrefix(a[2], st.IP+":") || !strings.HasPrefix(a[2], "127.") {
		t.Fatalf("loopback binds a private address, not the Pod IP: %s", a[2])
	}
}

func TestRestartPolicyAlwaysShowsCrashLoopBackOff(t *testing.T) {
	k := newKubelet(t, Options{BackoffInitial: 20 * time.Millisecond, BackoffMax: 40 * time.Millisecond})
	if _, err := k.Create(podSpec("crash", simtest.Crasher, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "three restarts", func() bool {
		s, _ := k.Get("ns", "crash")
		return s.Containers[0].RestartCount >= 3
	})
	eventually(t, 5*time.Second, "CrashLoopBackOff", func() bool {
		s, _ := k.Get("ns", "crash")
		c := s.Containers[0]
		return c.Waiting == ReasonCrashLoopBackOff && !s.Ready && c.LastTermination != nil &&
			c.LastTermination.ExitCode == 2 && c.LastTermination.Reason == ReasonError
	})
	s, _ := k.Get("ns", "crash")
	if s.Phase != PhaseRunning {
		t.Fatalf("a crash-looping Pod stays Running, got %s", s.Phase)
	}
	var backoffs int
	for _, e := range k.Events("ns", "crash") {
		if e.Reason == "BackOff" && strings.Contains(e.Message, "restarting failed container main") {
			backoffs++
		}
	}
	if backoffs == 0 {
		t.Fatalf("no BackOff event recorded")
	}
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	const initial, maxB = 20 * time.Millisecond, 80 * time.Millisecond
	k := newKubelet(t, Options{BackoffInitial: initial, BackoffMax: maxB, BackoffReset: time.Hour})
	var mu sync.Mutex
	var starts []time.Time
	m := func(context.Context, *proc.Container) int {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return 1
	}
	if _, err := k.Create(podSpec("b", m, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "6 starts", func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) >= 6 })
	mu.Lock()
	defer mu.Unlock()
	want := []time.Duration{20, 40, 80, 80, 80}
	for i, w := range want {
		gap := starts[i+1].Sub(starts[i])
		if gap < w*time.Millisecond {
			t.Errorf("restart %d came after %s, before its back-off %s", i+1, gap, w*time.Millisecond)
		}
		if gap > w*time.Millisecond+500*time.Millisecond {
			t.Errorf("restart %d came after %s, far beyond its back-off %s", i+1, gap, w*time.Millisecond)
		}
	}
}

func TestBackoffResetsAfterALongRun(t *testing.T) {
	k := newKubelet(t, Options{BackoffInitial: 10 * time.Millisecond, BackoffMax: 2 * time.Second,
		BackoffReset: 50 * time.Millisecond})
	var mu sync.Mutex
	var starts []time.Time
	m := func(ctx context.Context, _ *proc.Container) int {
		mu.Lock()
		n := len(starts)
		starts = append(starts, time.Now())
		mu.Unlock()
		if n == 3 { // the 4th run lasts longer than BackoffReset
			time.Sleep(80 * time.Millisecond)
		}
		return 1
	}
	if _, err := k.Create(podSpec("r", m, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "5 starts", func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) >= 5 })
	mu.Lock()
	defer mu.Unlock()
	// Without a reset the 4th back-off would be 80 ms; after a long run it is 10 ms again.
	if gap := starts[4].Sub(starts[3]) - 80*time.Millisecond; gap >= 70*time.Millisecond {
		t.Fatalf("back-off after a long run was %s; it should restart from the initial value", gap)
	}
}

func TestPreviousLogsAfterCrash(t *testing.T) {
	k := newKubelet(t, Options{BackoffInitial: 10 * time.Millisecond})
	if _, err := k.Create(podSpec("c", simtest.Crasher, map[string]string{"FAKE_EXIT_CODE": "2"})); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Logs("ns", "c", "main", true, time.Time{}); err == nil ||
		!strings.Contains(err.Error(), `previous terminated container "main" in pod "c" not found`) {
		// The first instance may already have crashed; only check when it has not.
		if s, _ := k.Get("ns", "c"); s.Containers[0].RestartCount == 0 {
			t.Fatalf("no previous container yet: %v", err)
		}
	}
	eventually(t, 5*time.Second, "a restart", func() bool {
		s, _ := k.Get("ns", "c")
		return s.Containers[0].RestartCount >= 2
	})
	prev, err := k.Logs("ns", "c", "main", true, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if prev != "starting c\nerror: crashing on purpose\n" {
		t.Fatalf("previous log keeps stdout and stderr interleaved: %q", prev)
	}
	cur, err := k.Logs("ns", "c", "", false, time.Time{})
	if err != nil || !strings.Contains(cur, "crashing on purpose") {
		t.Fatalf("current log: %q %v", cur, err)
	}
	if _, err := k.Logs("ns", "c", "nope", false, time.Time{}); err == nil {
		t.Fatalf("an unknown container is an error")
	}
}

func TestLogsSince(t *testing.T) {
	k := newKubelet(t, Options{})
	mark := make(chan time.Time, 1)
	m := func(ctx context.Context, c *proc.Container) int {
		fmt.Fprintln(c.Stdout, "before")
		time.Sleep(20 * time.Millisecond)
		mark <- time.Now()
		time.Sleep(5 * time.Millisecond)
		fmt.Fprintln(c.Stderr, "after")
		fmt.Fprint(c.Stdout, "partial")
		<-ctx.Done()
		return 0
	}
	if _, err := k.Create(podSpec("l", m, nil)); err != nil {
		t.Fatal(err)
	}
	since := <-mark
	eventually(t, 2*time.Second, "all output", func() bool {
		s, _ := k.Logs("ns", "l", "main", false, time.Time{})
		return strings.HasSuffix(s, "partial")
	})
	got, _ := k.Logs("ns", "l", "main", false, since)
	if got != "after\npartial" {
		t.Fatalf("since: %q", got)
	}
}

func TestLogSinkSeesLines(t *testing.T) {
	var mu sync.Mutex
	var lines []LogLine
	k := newKubelet(t, Options{LogSink: func(l LogLine) { mu.Lock(); lines = append(lines, l); mu.Unlock() }})
	if _, err := k.Create(podSpec("s", simtest.Crasher, map[string]string{"FAKE_RUN_FOR": "1h"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "two lines", func() bool { mu.Lock(); defer mu.Unlock(); return len(lines) >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if lines[1].Stream != "stderr" || lines[1].Text != "error: crashing on purpose" || lines[1].Pod != "s" {
		t.Fatalf("sink line: %+v", lines[1])
	}
}

func TestStartupAndReadinessProbesGateReady(t *testing.T) {
	k := newKubelet(t, Options{})
	start := time.Now()
	if _, err := k.Create(engineSpec("e", map[string]string{"SIM_ENGINE_STARTUP_DELAY": "150ms"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "ready", func() bool { s, _ := k.Get("ns", "e"); return s.Ready })
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("ready after %s, before /health answered 200", el)
	}
	s, _ := k.Get("ns", "e")
	if !s.Containers[0].Started {
		t.Fatalf("startup probe passed but container not marked started")
	}
}

func TestTCPReadinessProbe(t *testing.T) {
	k := newKubelet(t, Options{})
	listen := make(chan struct{})
	m := func(ctx context.Context, c *proc.Container) int {
		<-listen
		l, err := c.Listen("0.0.0.0:8081")
		if err != nil {
			return 1
		}
		defer l.Close()
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				_ = conn.Close()
			}
		}()
		<-ctx.Done()
		return 0
	}
	s := podSpec("r", m, nil)
	s.Containers[0].Ports = []int{8081}
	s.Containers[0].ReadinessProbe = &Probe{TCPPort: 8081, Period: 10 * time.Millisecond, FailureThreshold: 3}
	if _, err := k.Create(s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if st, _ := k.Get("ns", "r"); st.Ready {
		t.Fatalf("ready before listening on 8081")
	}
	close(listen)
	eventually(t, 2*time.Second, "ready", func() bool { st, _ := k.Get("ns", "r"); return st.Ready })
}

func TestLivenessFailureRestartsContainer(t *testing.T) {
	k := newKubelet(t, Options{BackoffInitial: 10 * time.Millisecond})
	m := func(ctx context.Context, c *proc.Container) int {
		<-ctx.Done() // never listens, so the liveness probe fails
		return 0
	}
	s := podSpec("live", m, nil)
	s.Containers[0].LivenessProbe = &Probe{TCPPort: 8000, Period: 10 * time.Millisecond, FailureThreshold: 2}
	if _, err := k.Create(s); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a liveness restart", func() bool {
		st, _ := k.Get("ns", "live")
		return st.Containers[0].RestartCount >= 1
	})
}

func TestDeletionShowsDeletingThenStops(t *testing.T) {
	k := newKubelet(t, Options{})
	stopped := make(chan time.Time, 1)
	m := func(ctx context.Context, c *proc.Container) int {
		<-ctx.Done()
		stopped <- time.Now()
		return 0
	}
	s := podSpec("d", m, nil)
	s.PreStopDelay = 100 * time.Millisecond
	if _, err := k.Create(s); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "ready", func() bool { st, _ := k.Get("ns", "d"); return st.Ready })
	ticks, cancel := k.Pods().Watch()
	defer cancel()
	deleted := time.Now()
	if !k.Delete("ns", "d") {
		t.Fatal("delete of an existing Pod returned false")
	}
	<-ticks
	pods := k.Pods().List("ns", map[string]string{"app": "t"})
	if len(pods) != 1 || !pods[0].Deleting || pods[0].Phase != PhaseRunning {
		t.Fatalf("a deleted Pod is first visible as Deleting and still Running: %+v", pods)
	}
	at := <-stopped
	if at.Sub(deleted) < 100*time.Millisecond {
		t.Fatalf("containers were stopped %s after deletion, before the pre-stop delay", at.Sub(deleted))
	}
	ctx, c := context.WithTimeout(context.Background(), 2*time.Second)
	defer c()
	if err := k.WaitGone(ctx, "ns", "d"); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Get("ns", "d"); ok {
		t.Fatal("Pod still listed after it is gone")
	}
	if k.Delete("ns", "d") {
		t.Fatal("deleting a gone Pod reports false")
	}
}

func TestPodWatcherFiltersByNamespaceAndLabels(t *testing.T) {
	k := newKubelet(t, Options{})
	hold := func(ctx context.Context, _ *proc.Container) int { <-ctx.Done(); return 0 }
	a := PodSpec{Name: "a", Namespace: "one", Labels: map[string]string{"x": "1", "y": "2"},
		Containers: []ContainerSpec{{Name: "c", Main: hold}}}
	b := PodSpec{Name: "b", Namespace: "one", Labels: map[string]string{"x": "1"},
		Containers: []ContainerSpec{{Name: "c", Main: hold}}}
	c := PodSpec{Name: "c", Namespace: "two", Labels: map[string]string{"x": "1", "y": "2"},
		Containers: []ContainerSpec{{Name: "c", Main: hold}}}
	for _, s := range []PodSpec{a, b, c} {
		if _, err := k.Create(s); err != nil {
			t.Fatal(err)
		}
	}
	w := k.Pods()
	if got := w.List("one", map[string]string{"x": "1", "y": "2"}); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("namespace + labels: %+v", got)
	}
	if got := w.List("", map[string]string{"y": "2"}); len(got) != 2 {
		t.Fatalf("all namespaces: %+v", got)
	}
	if _, err := k.Create(a); err == nil {
		t.Fatal("a duplicate name in a namespace is refused")
	}
	if a2, _ := k.Get("one", "a"); a2.UID == "" || len(a2.UID) != 36 {
		t.Fatalf("UID: %q", a2.UID)
	}
}

func TestPanicIsExitCode2(t *testing.T) {
	k := newKubelet(t, Options{BackoffInitial: time.Hour})
	m := func(context.Context, *proc.Container) int { panic("boom") }
	if _, err := k.Create(podSpec("p", m, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "termination", func() bool {
		s, _ := k.Get("ns", "p")
		return s.Containers[0].LastTermination != nil
	})
	s, _ := k.Get("ns", "p")
	if s.Containers[0].LastTermination.ExitCode != 2 {
		t.Fatalf("exit code %d", s.Containers[0].LastTermination.ExitCode)
	}
	if l, _ := k.Logs("ns", "p", "main", false, time.Time{}); !strings.HasPrefix(l, "panic: boom") {
		t.Fatalf("log: %q", l)
	}
}

func TestGenerateName(t *testing.T) {
	n := GenerateName("qwen-server-")
	if len(n) != len("qwen-server-")+5 || strings.ContainsAny(n[len(n)-5:], "aeiou013") {
		t.Fatalf("%q", n)
	}
}

func TestDescribe(t *testing.T) {
	k := newKubelet(t, Options{BackoffInitial: time.Hour})
	if _, err := k.Create(podSpec("c", simtest.Crasher, map[string]string{"FAKE_EXIT_CODE": "3"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "a crash", func() bool {
		s, _ := k.Get("ns", "c")
		return s.Containers[0].Waiting == ReasonCrashLoopBackOff
	})
	d := k.Describe("ns", "c")
	for _, want := range []string{"Name:         c", "Reason:       CrashLoopBackOff", "Exit Code:    3",
		"Restart Count:  1", "FAKE_EXIT_CODE=3", "BackOff"} {
		if !strings.Contains(d, want) {
			t.Errorf("describe lacks %q:\n%s", want, d)
		}
	}
	if k.Describe("ns", "nope") != "" {
		t.Error("describe of a missing Pod")
	}
}

// The status sink sees a Pod's life as a watch would: created not Ready,
// Ready after its probes, deleting, then removed, in that order and with
// the Pod's identity on every update.
func TestStatusSinkDeliversEveryChangeInOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []PodUpdate
	k := newKubelet(t, Options{StatusSink: func(u PodUpdate) { mu.Lock(); seen = append(seen, u); mu.Unlock() }})
	st, err := k.Create(engineSpec("e", nil))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "ready", func() bool { s, _ := k.Get("ns", "e"); return s.Ready })
	k.Delete("ns", "e")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := k.WaitGone(ctx, "ns", "e"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "the removal update", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1].Removed
	})
	mu.Lock()
	defer mu.Unlock()
	// Reduce the updates to the stages they show, dropping repeats.
	var stages []string
	for i, u := range seen {
		if u.Pod.UID != st.UID || u.Pod.Labels["app"] != "t" {
			t.Fatalf("update %d is about another Pod: %+v", i, u.Pod)
		}
		if i > 0 && u.At.Before(seen[i-1].At) {
			t.Fatalf("update %d is older than update %d", i, i-1)
		}
		stage := "created"
		switch {
		case u.Removed:
			stage = "removed"
		case u.Pod.Deleting():
			stage = "deleting"
		case u.Pod.Ready:
			stage = "ready"
		}
		if len(stages) == 0 || stages[len(stages)-1] != stage {
			stages = append(stages, stage)
		}
	}
	if got := strings.Join(stages, ","); got != "created,ready,deleting,removed" {
		t.Fatalf("stages %s (from %d updates), want created,ready,deleting,removed", got, len(seen))
	}
}

// A Pod CIDR gives addresses from that /16, past its first /24 (the
// node's); 127.77.0.0/16 is on lo here as 10.244.0.0/16 is in the
// apiserver tier's network namespace.
func TestPodCIDRGivesAddressesFromThatRange(t *testing.T) {
	k := newKubelet(t, Options{PodCIDR: "127.77.0.0/16"})
	st, err := k.Create(podSpec("cidr", simtest.Engine, nil))
	if err != nil {
		t.Fatal(err)
	}
	if st.IP != "127.77.1.1" {
		t.Errorf("first Pod IP %s, want 127.77.1.1 (127.77.0.0/24 is the node's)", st.IP)
	}
	for _, bad := range []string{"10.0.0.0/8", "fd00::/16", "not-a-cidr"} {
		_, err := newKubelet(t, Options{PodCIDR: bad}).Create(podSpec("bad", simtest.Engine, nil))
		if err == nil || !strings.Contains(err.Error(), "PodCIDR") {
			t.Errorf("PodCIDR %q: create = %v, want an error naming PodCIDR", bad, err)
		}
	}
}

// An API server's UID is kept, and a router gets the given Pods API.
func TestPodUIDAndPodWatcherFromOptions(t *testing.T) {
	other := New(Options{})
	seen := make(chan proc.PodWatcher, 1)
	k := newKubelet(t, Options{PodWatcher: other.Pods(), NodeName: "node-a"})
	spec := podSpec("watcher", func(ctx context.Context, c *proc.Container) int {
		seen <- c.Pods
		<-ctx.Done()
		return 0
	}, nil)
	spec.UID = "0b7e2f6c-3d1a-4c55-9e0f-1a2b3c4d5e6f"
	spec.Containers[0].WatchPods = true
	st, err := k.Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	if st.UID != spec.UID {
		t.Errorf("UID %s, want the given %s", st.UID, spec.UID)
	}
	if got := <-seen; got != other.Pods() {
		t.Errorf("the container got %v, want Options.PodWatcher", got)
	}
	if ev := k.Events("ns", "watcher"); len(ev) == 0 || !strings.HasSuffix(ev[0].Message, " to node-a") {
		t.Errorf("Scheduled event %v, want it to name node-a", ev)
	}
}
