package sglanggateway

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/cli"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/tracing"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

var siteLoadMonitor = tracing.Site{Target: "smg::core::worker_manager", File: "src/core/worker_manager.rs", Line: 350}

type loadInfo struct {
	worker string
	load   int64
}

// fetchLoads is get_all_worker_loads: every worker's SGLang GET /get_load,
// num_tokens summed over the returned array; -1 when it fails.
func (rt *router) fetchLoads(ctx context.Context) []loadInfo {
	ws := rt.reg.All()
	out := make([]loadInfo, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = loadInfo{worker: w.URL(), load: -1}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			res := httpx.Send(cctx, rt.client, http.MethodGet, w.URL()+"/get_load", nil, nil, false, nil)
			if res.Err != nil || res.Status/100 != 2 {
				return
			}
			var arr []map[string]any
			if json.Unmarshal(res.Body, &arr) != nil {
				return
			}
			var sum int64
			for _, e := range arr {
				if n, ok := e["num_tokens"].(float64); ok && n == float64(int64(n)) {
					sum += int64(n)
				}
			}
			out[i].load = sum
		}()
	}
	wg.Wait()
	return out
}

func (rt *router) getLoads(w http.ResponseWriter, r *http.Request) {
	var items []json.RawMessage
	for _, l := range rt.fetchLoads(r.Context()) {
		items = append(items, httpx.Ordered("worker", l.worker, "load", l.load))
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	raw, _ := json.Marshal(items)
	writeRaw(w, http.StatusOK, httpx.Ordered("workers", json.RawMessage(raw)))
}

// runLoadMonitor is LoadMonitor: with a power_of_two policy, poll the loads
// every --worker-startup-check-interval and push them to those policies.
func (rt *router) runLoadMonitor(ctx context.Context) {
	var p2 []policy.LoadUpdater
	for _, p := range []policy.Policy{rt.pols.Regular, rt.pols.Prefill, rt.pols.Decode} {
		if lu, ok := p.(policy.LoadUpdater); ok && p.Name() == policy.PowerOfTwo {
			p2 = append(p2, lu)
		}
	}
	if len(p2) == 0 {
		return
	}
	interval := cli.Secs(rt.cfg.StartupInterval)
	if interval <= 0 {
		return
	}
	rt.log.Info(siteLoadMonitor, "Starting load monitoring with interval: %ds", rt.cfg.StartupInterval)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		loads := rt.fetchLoads(ctx)
		if len(loads) > 0 {
			m := make(map[string]int64, len(loads))
			for _, l := range loads {
				m[l.worker] = l.load
			}
			for _, lu := range p2 {
				lu.UpdateLoads(m)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
