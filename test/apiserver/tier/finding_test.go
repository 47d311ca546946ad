package tier

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/clusters"
	"github.com/gpustack/routing-conformance/test/apiserver/stack"
)

// routerWorkers are the worker URLs the router behind base (…/v1) lists
// on GET /workers.
func routerWorkers(ctx context.Context, base string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/v1")+"/workers", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Workers []struct {
			URL string `json:"url"`
		} `json:"workers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	var out []string
	for _, w := range list.Workers {
		out = append(out, w.URL)
	}
	return out, nil
}

// Under a real API server's discovery, the routers built from the pinned
// source without the operator's discovery patch (vllm-router 0002,
// sglang-gateway 0001) withdraw an engine Pod deleted with a zero grace
// period: the Pod's update with its deletionTimestamp reaches their watch
// before it goes, and that is the one change upstream's discovery withdraws
// a worker on (vllm-project/router@v0.1.15:src/service_discovery.rs
// handle_pod_deletion). So the stale worker of vllm-project/router#279 does
// not follow from a force delete here; the readiness part of the patch is
// the finding (upstream's TestUnpatchedDiscoveryKeepsAnUnreadyEngine).
// The test kills one engine Pod, waits for its replacement and reads each
// router's GET /workers 3 s later.
func TestUnpatchedDiscoveryWithdrawsAForceDeletedEngine(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	for _, tc := range []struct {
		router, engine string
		// keeps: the unpatched router still lists the killed Pod.
		keeps bool
	}{
		{api.RouterVLLM, api.EngineVLLM, false},
		{api.RouterSGLang, api.EngineSGLang, false},
	} {
		t.Run(tc.router, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			md := routedMD("stale-"+strings.Split(tc.router, "-")[0], "--policy", "round_robin")
			md.Spec.Router.Name, md.Spec.Engine.Name = tc.router, tc.engine
			if tc.engine == api.EngineSGLang {
				md.Spec.Engine.Version = "0.5.18"
			}
			_, d := deployReady(ctx, t, s, md)
			base, err := d.OpenAIBaseURL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := d.Replicas(ctx)
			if err != nil || len(rs) != 2 {
				t.Fatalf("replicas %v, %v", rs, err)
			}
			victim := rs[0]
			url := "http://" + victim.IP + ":" + strconv.Itoa(victim.Port)
			if err := d.(clusters.FaultInjector).KillEnginePod(ctx, victim); err != nil {
				t.Fatal(err)
			}
			awaitReplacement(ctx, t, d, victim, 2)
			if err := d.WaitReady(ctx, 100*time.Millisecond); err != nil {
				t.Fatalf("WaitReady after the kill: %v", err)
			}
			time.Sleep(3 * time.Second)
			workers, err := routerWorkers(ctx, base)
			if err != nil {
				t.Fatal(err)
			}
			kept := slices.Contains(workers, url)
			t.Logf("%s lists %v 3 s after the replacement of force-deleted %s (%s) was Ready", tc.router, workers, victim.Name, url)
			if kept != tc.keeps {
				t.Errorf("%s keeps the force-deleted Pod's worker: %t, want %t (docs/routers-from-source.md#discovery-without-the-operators-patches)",
					tc.router, kept, tc.keeps)
			}
		})
	}
}

// awaitReplacement waits until d has n replicas again, none of them victim
// (by UID), and returns them.
func awaitReplacement(ctx context.Context, t *testing.T, d clusters.Deployment, victim clusters.Replica, n int) []clusters.Replica {
	t.Helper()
	for {
		now, err := d.Replicas(ctx)
		if err == nil && len(now) == n && !slices.ContainsFunc(now, func(r clusters.Replica) bool { return r.UID == victim.UID }) {
			return now
		}
		if ctx.Err() != nil {
			t.Fatalf("no replacement for %s: %v", victim.Name, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
