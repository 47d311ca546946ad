package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkLeaks verifies, after every other cleanup of the test has run (the
// fake API server, echo servers), that no goroutine the test started is left.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, append(spdystreamShutdown, ignore)...) })
}

func echoServer(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name+" "+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestPortForwardReconnectsOnTheSameURLAfterADrop(t *testing.T) {
	checkLeaks(t)
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	srv := echoServer(t, "router")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	e.fwd.setBackend("md-router-a", srv.Listener.Addr().String())

	base, err := d.OpenAIBaseURL(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") {
		t.Fatalf("base URL %q", base)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	get := func() (string, error) {
		resp, err := client.Get(base + "/models")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(); err != nil || got != "router /v1/models" {
		t.Fatalf("first request: %q %v", got, err)
	}
	if n := e.fwd.callCount(); n != 1 {
		t.Fatalf("forwards opened: %d", n)
	}

	// The API server connection drops: the tunnel's listener and its
	// connections die. The next request must succeed through a new tunnel.
	e.fwd.last().Drop()
	client.CloseIdleConnections()
	var got string
	eventually(t, "a request after the drop", func() bool {
		got, err = get()
		return err == nil
	})
	if got != "router /v1/models" {
		t.Errorf("after the drop: %q", got)
	}
	if n := e.fwd.callCount(); n != 2 {
		t.Errorf("forwards opened: %d, want 2 (one reconnect)", n)
	}
	base2, _ := d.OpenAIBaseURL(context.Background())
	if base2 != base {
		t.Errorf("URL changed: %s -> %s", base, base2)
	}
	client.CloseIdleConnections()
	if err := d.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPortForwardSpreadsConnectionsLikeTheService: each new connection goes
// to a Ready, not terminating router Pod at random, as kube-proxy sends a
// connection to the <md>-router Service; a terminating Pod serves only when
// no Pod is Ready.
func TestPortForwardSpreadsConnectionsLikeTheService(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	a, b, old := echoServer(t, "a"), echoServer(t, "b"), echoServer(t, "old")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	e.addPod(routerPod(d.ns, d.name, "md-router-b", "u2"))
	e.addPod(routerPod(d.ns, d.name, "md-router-c", "u3", crashLooping(2))) // not Ready
	e.addPod(routerPod(d.ns, d.name, "md-router-old", "u4", func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now // terminating, still Ready
		p.Finalizers = []string{"test/keep"}
	}))
	e.fwd.setBackend("md-router-a", a.Listener.Addr().String())
	e.fwd.setBackend("md-router-b", b.Listener.Addr().String())
	e.fwd.setBackend("md-router-old", old.Listener.Addr().String())
	base, _ := d.OpenAIBaseURL(context.Background())
	got := map[string]int{}
	const n = 60
	for range n {
		got[freshGet(t, base+"/x")]++
	}
	// Binomial(60, 1/2): 15 either side is almost 4 sd.
	if got["a /v1/x"]+got["b /v1/x"] != n || got["a /v1/x"] < 15 || got["b /v1/x"] < 15 {
		t.Fatalf("connections per router Pod %v; want a and b only, each near %d", got, n/2)
	}
	if calls := e.fwd.callCount(); calls != 2 {
		t.Errorf("%d port-forwards opened, want one per Pod reached (2)", calls)
	}
	for _, name := range []string{"md-router-a", "md-router-b"} {
		if err := e.kube.CoreV1().Pods(d.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := freshGet(t, base+"/y"); got != "old /v1/y" {
		t.Errorf("with no Ready Pod left the terminating one serves; reached %q", got)
	}
	d.closeProxy()
}

func TestPortForwardWithoutReadyRouterFailsTheRequestNotTheSuite(t *testing.T) {
	checkLeaks(t)
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1", crashLooping(2)))
	base, err := d.OpenAIBaseURL(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	_, err = client.Get(base + "/models")
	if err == nil {
		t.Fatal("a request without a Ready router Pod succeeded")
	}
	client.CloseIdleConnections()
	d.closeProxy()
}

func TestPortForwardErrorIsRetriedOnTheNextRequest(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	d := deployed(t, e, "md")
	srv := echoServer(t, "router")
	e.addPod(routerPod(d.ns, d.name, "md-router-a", "u1"))
	e.fwd.setBackend("md-router-a", srv.Listener.Addr().String())
	e.fwd.fail = errors.New("error upgrading connection: unable to upgrade connection: pod not found")
	base, _ := d.OpenAIBaseURL(context.Background())
	client := &http.Client{Timeout: 5 * time.Second}
	if _, err := client.Get(base + "/a"); err == nil {
		t.Fatal("request through a failing forwarder succeeded")
	}
	e.fwd.mu.Lock()
	e.fwd.fail = nil
	e.fwd.mu.Unlock()
	if got := httpGet(t, base+"/b"); got != "router /v1/b" {
		t.Errorf("after the forwarder recovered: %q", got)
	}
}

func TestInClusterUsesTheRouterService(t *testing.T) {
	e := newFakeEnv(t, instanceTypeObj(h20, PhaseActive, true, "2", "q"))
	e.cluster.inCluster = true
	d := deployed(t, e, "md")
	base, err := d.OpenAIBaseURL(context.Background())
	if err != nil || base != "http://md-router."+d.ns+".svc:8081/v1" {
		t.Errorf("in-cluster URL %q %v", base, err)
	}
	if e.fwd.callCount() != 0 {
		t.Error("in-cluster mode opened a port-forward")
	}
}

// freshGet is httpGet on a connection of its own.
func freshGet(t *testing.T, url string) string {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
