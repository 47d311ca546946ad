package sim_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/metrics"
)

const chatBody = `{"model":"Qwen/Qwen2.5-0.5B-Instruct","messages":[{"role":"user","content":"hi"}]}`

// chatStatus posts one chat request on client and returns the status (0 and the
// error for a transport failure).
func chatStatus(ctx context.Context, client *http.Client, base string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// load sends serial chats on one keep-alive client until stop, counting
// outcomes, as a user's client would during a rollout.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	done       chan struct{}
}

func startLoad(ctx context.Context, base string, stop <-chan struct{}) *load {
	l := &load{done: make(chan struct{})}
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	go func() {
		defer close(l.done)
		defer tr.CloseIdleConnections()
		for {
			select {
			case <-stop:
				return
			default:
			}
			code, err := chatStatus(ctx, client, base)
			if err == nil && code == 200 {
				l.ok.Add(1)
				continue
			}
			l.failed.Add(1)
			l.mu.Lock()
			l.errs = append(l.errs, fmt.Sprintf("status %d: %v", code, err))
			l.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return l
}

// perRouterPod sums counter in each router Pod's scrape, by Pod name.
func perRouterPod(ctx context.Context, t *testing.T, d clusters.Deployment, counter string) map[string]float64 {
	t.Helper()
	snap, err := d.RouterMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]float64{}
	for _, s := range snap.Samples {
		if s.Name == counter {
			per[s.Labels[metrics.SourceLabel]] += s.Value
		}
	}
	return per
}

func uids(t *testing.T, d clusters.Deployment) (router []string, engines []string) {
	t.Helper()
	ps, err := d.RouterState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		router = append(router, p.UID)
	}
	rs, _ := d.Replicas(context.Background())
	for _, r := range rs {
		engines = append(engines, r.Name)
	}
	return router, engines
}

// TestRouterServiceFollowsAReplacedRouterPod: the URL the suite holds is the
// router Service's, so requests keep working after the router Pod is
// deleted and its ReplicaSet replaces it, as through <md>-router on a
// cluster. (Before the Service, the URL was the old Pod's own address.)
func TestRouterServiceFollowsAReplacedRouterPod(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("svc", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 20*time.Second)
	base, err := d.OpenAIBaseURL(ctx)
	if err != nil || !strings.HasSuffix(base, ":8081/v1") {
		t.Fatalf("%q %v", base, err)
	}
	before, _ := d.RouterState(ctx)
	if strings.Contains(base, before[0].IP) {
		t.Fatalf("base URL %s is the router Pod's own address %s, not the Service's", base, before[0].IP)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	if code, err := chatStatus(ctx, client, base); code != 200 {
		t.Fatalf("before: %d %v", code, err)
	}
	if err := d.(clusters.FaultInjector).DeleteRouterPod(ctx, before[0].Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new Ready router Pod", func() (bool, string) {
		ps, _ := d.RouterState(ctx)
		return len(ps) == 1 && ps[0].UID != before[0].UID && ps[0].Ready, fmt.Sprint(ps)
	})
	eventually(t, 5*time.Second, "a request through the same URL", func() (bool, string) {
		code, err := chatStatus(ctx, client, base)
		return code == 200, fmt.Sprint(code, err)
	})
	if base2, _ := d.OpenAIBaseURL(ctx); base2 != base {
		t.Errorf("the Service URL changed: %s -> %s", base, base2)
	}
}

// TestInClusterRouterServiceNameFollowsAReplacedRouterPod: a program in the
// cluster that resolves <md>-router.<ns>.svc (the sim's in-cluster client,
// resolveService) dials the router Service's ClusterIP, not a Pod's
// address, reaches the Ready router Pod behind it, and after that Pod is
// deleted reaches its replacement under the same name.
func TestInClusterRouterServiceNameFollowsAReplacedRouterPod(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("insvc", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 30*time.Second)
	client := sim.InClusterClient(c)
	defer client.CloseIdleConnections()
	base := fmt.Sprintf("http://%s-router.%s.svc.cluster.local:%d/v1", d.Name(), d.Namespace(), api.RouterHTTPPort)
	svcURL, err := d.OpenAIBaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := strings.TrimSuffix(strings.TrimPrefix(svcURL, "http://"), fmt.Sprintf(":%d/v1", api.RouterHTTPPort))
	// chat sends one chat through the Service name and returns the address
	// the client dialled.
	chat := func() (remote string, code int, err error) {
		tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { remote = i.Conn.RemoteAddr().String() }})
		code, err = chatStatus(tctx, client, base)
		return remote, code, err
	}
	// servedBy is the fake router's proxied requests per router Pod.
	servedBy := func() map[string]float64 { return perRouterPod(ctx, t, d, "fake_router_requests_total") }

	before, _ := d.RouterState(ctx)
	if len(before) != 1 || !before[0].Ready {
		t.Fatalf("router Pods %v, want one Ready", before)
	}
	remote, code, err := chat()
	if code != 200 {
		t.Fatalf("chat through %s: %d %v", base, code, err)
	}
	if host, _, _ := net.SplitHostPort(remote); host != clusterIP || host == before[0].IP {
		t.Fatalf("dialled %s for %s, want the Service's ClusterIP %s (router Pod %s is %s)", remote, base, clusterIP, before[0].Name, before[0].IP)
	}
	if got := servedBy(); got[before[0].Name] != 1 {
		t.Fatalf("requests per router Pod %v, want 1 on %s", got, before[0].Name)
	}

	if err := d.(clusters.FaultInjector).DeleteRouterPod(ctx, before[0].Name); err != nil {
		t.Fatal(err)
	}
	var after []clusters.RouterPod
	eventually(t, 10*time.Second, "a new Ready router Pod", func() (bool, string) {
		after, _ = d.RouterState(ctx)
		return len(after) == 1 && after[0].UID != before[0].UID && after[0].Ready, fmt.Sprint(after)
	})
	eventually(t, 5*time.Second, "a chat through the same Service name", func() (bool, string) {
		remote, code, err = chat()
		return code == 200, fmt.Sprint(code, err)
	})
	if host, _, _ := net.SplitHostPort(remote); host != clusterIP {
		t.Errorf("dialled %s after the replacement, want the ClusterIP %s", remote, clusterIP)
	}
	if got := servedBy(); got[after[0].Name] != 1 {
		t.Errorf("requests per router Pod %v, want 1 on the replacement %s", got, after[0].Name)
	}

	// A name no live deployment's Service has is not found.
	missing := fmt.Sprintf("http://nope-router.%s.svc:%d/v1", d.Namespace(), api.RouterHTTPPort)
	if code, err := chatStatus(ctx, client, missing); err == nil || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("chat to %s: %d %v, want no such host", missing, code, err)
	}
}

// TestExtraArgsEditRollsTheRouterWithoutDroppingTraffic: maxSurge 1,
// maxUnavailable 0: the new router Pod is Ready before the old one goes,
// and the Service sends new connections to it, so a keep-alive client loses
// at most the request in flight on the old Pod's connection when it closes.
func TestExtraArgsEditRollsTheRouterWithoutDroppingTraffic(t *testing.T) {
	c := realCluster(t, sim.Options{})
	d := deployReady(t, c, md("roll", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 30*time.Second)
	base, err := d.OpenAIBaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldRouter, engines := uids(t, d)
	stop := make(chan struct{})
	l := startLoad(ctx, base, stop)
	eventually(t, 5*time.Second, "traffic flowing", func() (bool, string) { return l.ok.Load() > 20, "" })
	if err := d.Update(ctx, func(m *api.ModelDeployment) { m.Spec.Router.ExtraArgs = []string{"--policy", "round_robin"} }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "only the new router Pod left", func() (bool, string) {
		ps, _ := d.RouterState(ctx)
		return len(ps) == 1 && ps[0].UID != oldRouter[0] && ps[0].Ready, fmt.Sprint(ps)
	})
	okAt := l.ok.Load()
	eventually(t, 5*time.Second, "traffic through the new router", func() (bool, string) { return l.ok.Load() > okAt+20, "" })
	close(stop)
	<-l.done
	t.Logf("%d ok, %d failed during the rollout", l.ok.Load(), l.failed.Load())
	if f := l.failed.Load(); f > 1 {
		t.Errorf("%d requests failed during the rollout (bound: 1, the one in flight on the kept-alive connection): %v", f, l.errs)
	}
	logs, _ := d.RouterLogs(ctx, clusters.LogOptions{})
	if !strings.Contains(logs, "policy: RoundRobin") {
		t.Errorf("new router's banner:\n%s", logs)
	}
	_, after := uids(t, d)
	if fmt.Sprint(after) != fmt.Sprint(engines) {
		t.Errorf("engines replaced by a router edit: %v -> %v", engines, after)
	}
}

// TestTwoRouterReplicasShareTheServiceConnections: with router.replicas 2,
// new connections spread over both router Pods, each counting its own
// requests.
func TestTwoRouterReplicasShareTheServiceConnections(t *testing.T) {
	c := realCluster(t, sim.Options{})
	m := md("two", api.RouterSGLang, api.EngineSGLang, 2)
	m.Spec.Router.Replicas = api.Ptr(int32(2))
	d := deployReady(t, c, m)
	ctx := ctxT(t, 20*time.Second)
	ps, _ := d.RouterState(ctx)
	if len(ps) != 2 {
		t.Fatalf("router Pods %v", ps)
	}
	base, _ := d.OpenAIBaseURL(ctx)
	const n = 80
	for range n {
		tr := &http.Transport{DisableKeepAlives: true}
		if code, err := chatStatus(ctx, &http.Client{Transport: tr, Timeout: 5 * time.Second}, base); code != 200 {
			t.Fatalf("%d %v", code, err)
		}
	}
	per := perRouterPod(ctx, t, d, "smg_router_requests_total")
	// Binomial(80, 1/2): sd 4.5; 20 either side is over 4 sd.
	if len(per) != 2 || per[ps[0].Name]+per[ps[1].Name] != n || per[ps[0].Name] < 20 || per[ps[1].Name] < 20 {
		t.Fatalf("requests per router Pod %v, want both near %d of %d", per, n/2, n)
	}
}

// TestKilledEnginePodIsReplaced: a killed engine Pod is replaced by a new
// one and the deployment is whole again.
func TestKilledEnginePodIsReplaced(t *testing.T) {
	c := newCluster(t, sim.Options{})
	d := deployReady(t, c, md("kill", api.RouterVLLM, api.EngineVLLM, 2))
	ctx := ctxT(t, 20*time.Second)
	rs, _ := d.Replicas(ctx)
	if err := d.(clusters.FaultInjector).KillEnginePod(ctx, rs[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a replacement replica", func() (bool, string) {
		now, _ := d.Replicas(ctx)
		names := fmt.Sprint(now)
		return len(now) == 2 && now[0].Name != rs[0].Name && now[1].Name != rs[0].Name, names
	})
	if err := d.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := d.(clusters.FaultInjector).KillEnginePod(ctx, clusters.Replica{Name: "nope"}); err == nil {
		t.Error("killing a missing Pod succeeded")
	}
	ps, _ := d.RouterState(ctx)
	if err := d.(clusters.FaultInjector).KillEnginePod(ctx, clusters.Replica{Name: ps[0].Name}); err == nil {
		t.Error("KillEnginePod killed a router Pod")
	}
}
