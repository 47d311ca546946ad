package epp_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/epp"
)

func observe(t *testing.T, r *routerPod) (int, epp.ObserverView) {
	t.Helper()
	resp, err := http.Get("http://" + net.JoinHostPort(r.ip, "9090") + epp.ObserverPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v epp.ObserverView
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
	}
	return resp.StatusCode, v
}

func TestObserverListsEndpointsOnTheMetricsServer(t *testing.T) {
	r := startRouter(t, podOpts{config: "sglang-server.yaml", kinds: []string{"server", "server"}})
	r.waitStarted()
	code, v := observe(t, r)
	if code != 200 || len(v.Workers) != 2 || v.Router.Boot == 0 || v.Router.Now == 0 {
		t.Fatalf("%d %+v", code, v)
	}
	w := v.Workers[0]
	e := r.engines[0]
	if w.URL != "http://"+e.Addr() || w.Port != "8000" || w.Role != "server" || w.PodHint != e.Name ||
		w.WorkerID != "team-a/"+e.Name+"-rank-0" || !w.Selection.InSelection || !w.Selection.Registered || !w.Selection.Healthy || w.LastJob != nil {
		t.Fatalf("worker (port is a JSON string in the patch): %+v", w)
	}
	r.post("/v1/chat/completions", chat("x", false), nil)
	var served int
	for i, en := range r.engines {
		if en.Requests.Load() == 1 {
			served = i
		}
	}
	gone := r.engines[served]
	r.pods.Delete("team-a", gone.Name)
	r.waitFor(func() bool {
		_, v := observe(t, r)
		return len(v.Workers) == 2 && !v.Workers[served].Selection.InSelection
	}, "removal")
	_, v2 := observe(t, r)
	row := v2.Workers[served]
	if row.LastJob == nil || !row.LastJob.Recent || row.Selection.Registered || v2.Revision <= v.Revision {
		t.Fatalf("a removed endpoint dispatched to within 15 s stays listed, out of selection: %+v rev %d→%d", row, v.Revision, v2.Revision)
	}
	_ = time.Second
}
