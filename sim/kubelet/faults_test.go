package kubelet

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/proc"
)

// servingMain serves /ok ("ok") and /slow (a partial body, then nothing
// until the request ends) on :8000 behind the Pod's faults, and drains
// gracefully for up to 10 s on SIGTERM, as the sim's programs do.
func servingMain(ctx context.Context, c *proc.Container) int {
	ln, err := c.Listen(":8000")
	if err != nil {
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := &http.Server{Handler: c.Faults.Handler(8000, mux), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}

func servingPod(t *testing.T, k *Kubelet, name string) PodStatus {
	t.Helper()
	spec := podSpec(name, servingMain, nil)
	spec.Containers[0].ReadinessProbe = &Probe{TCPPort: 8000, Period: 10 * time.Millisecond, FailureThreshold: 1}
	spec.TerminationGracePeriod = 10 * time.Second
	if _, err := k.Create(spec); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, name+" ready", func() bool { s, _ := k.Get("ns", name); return s.Ready })
	st, _ := k.Get("ns", name)
	return st
}

func TestKillCutsInFlightExchangesAtOnce(t *testing.T) {
	k := newKubelet(t, Options{})
	st := servingPod(t, k, "victim")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + st.IP + ":8000/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len("partial"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if !k.Kill("ns", "victim") {
		t.Fatal("Kill found no Pod")
	}
	// A graceful delete would let /slow run for its 10 s drain; a kill
	// resets the connection now.
	_, err = io.ReadAll(resp.Body)
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("read after the kill: %v after %s, want an error at once", err, time.Since(start))
	}
	if err := k.WaitGone(context.Background(), "ns", "victim"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get("http://" + st.IP + ":8000/ok"); err == nil {
		t.Fatal("the killed Pod still answers")
	}
	if k.Kill("ns", "victim") {
		t.Error("Kill of a gone Pod reported true")
	}
}

func TestInjectedHTTPFaultsAnswerUntilLifted(t *testing.T) {
	k := newKubelet(t, Options{})
	st := servingPod(t, k, "p")
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	get := func(ctx context.Context, path string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.IP+":8000"+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	lift503, err := k.InjectHTTPFault("ns", "p", proc.HTTPFault{Port: 8000, PathPrefix: "/ok", Status: 503, Body: "injected"})
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := get(context.Background(), "/ok"); err != nil || code != 503 || body != "injected" {
		t.Fatalf("/ok under the fault: %d %q %v", code, body, err)
	}
	// Another port or path is untouched.
	lift503()
	lift503() // twice is harmless
	if code, body, _ := get(context.Background(), "/ok"); code != 200 || body != "ok" {
		t.Fatalf("/ok after lifting: %d %q", code, body)
	}

	liftHang, err := k.InjectHTTPFault("ns", "p", proc.HTTPFault{Port: 8000, Hang: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, _, err = get(ctx, "/ok")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hung port answered: %v", err)
	}
	// A request waiting when the fault is lifted is answered then.
	done := make(chan string, 1)
	go func() { _, body, _ := get(context.Background(), "/ok"); done <- body }()
	time.Sleep(50 * time.Millisecond)
	liftHang()
	select {
	case body := <-done:
		if body != "ok" {
			t.Fatalf("late answer %q", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request was not answered after lifting")
	}
	events := k.Events("ns", "p")
	var seen []string
	for _, e := range events {
		if e.Reason == "FaultInjected" {
			seen = append(seen, e.Message)
		}
	}
	if len(seen) != 2 || !strings.Contains(seen[0], "HTTP on port 8000 under /ok answers 503") || !strings.Contains(seen[1], "never answers") {
		t.Errorf("fault events %q", seen)
	}
	if _, err := k.InjectHTTPFault("ns", "nope", proc.HTTPFault{Port: 8000, Hang: true}); err == nil {
		t.Error("a fault on a missing Pod was accepted")
	}
}
