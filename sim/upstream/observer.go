package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/sim/operator"
)

// The operator's router image patches both routers to serve GET
// /observer/endpoints on 8081 (docs/operator.md#finding-things-in-a-cluster),
// which the operator reads to publish status.roles[].endpoints.serving:
// without it no deployment becomes Ready. The pinned source lacks the patch
// (make routers applies it only with ROUTER_PATCHES), so the Go front of the
// router container serves the same document from what the router process
// itself reports: its worker registry (GET /workers,
// which both libraries serve: url, worker_type, is_healthy) and each
// worker's circuit-breaker gauge on its /metrics (1 is open in both). This
// view is emulated; the membership in it is upstream's.

// observerTimeout bounds the two reads one view takes.
const observerTimeout = 2 * time.Second

// cbGauges are the circuit-breaker state gauges per worker, by router
// (vllm-project/router@v0.1.15:src/metrics.rs set_cb_state;
// sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/observability/metrics.rs
// set_worker_cb_state): 0 closed, 1 open, 2 half-open.
var cbGauges = map[string]string{
	api.RouterVLLM:   "vllm_router_cb_state",
	api.RouterSGLang: "smg_worker_cb_state",
}

const cbOpen = 1

// upstreamWorkers is GET /workers of either library.
type upstreamWorkers struct {
	Workers []struct {
		ID         string `json:"id"`
		URL        string `json:"url"`
		WorkerType string `json:"worker_type"`
		Healthy    bool   `json:"is_healthy"`
	} `json:"workers"`
}

// observer serves the view for router, whose process serves its API on
// backend and its metrics on metricsBackend ("" for none), booted at boot.
type observer struct {
	router                  string
	backend, metricsBackend string
	boot                    time.Time
	client                  *http.Client
}

func newObserver(router, backend, metricsBackend string, boot time.Time) *observer {
	return &observer{router: router, backend: backend, metricsBackend: metricsBackend, boot: boot,
		client: &http.Client{Timeout: observerTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2}}}
}

// ServeHTTP answers GET /observer/endpoints; a read that fails is a 503
// naming it, as a router that cannot build its view would answer.
func (o *observer) ServeHTTP(w http.ResponseWriter, r *http.Request) { serveView(w, r, o.view) }

// serveView answers GET with the document view builds, a failed build as
// a 503 naming what failed; the routers' and the EPP's fronts share it.
func serveView(w http.ResponseWriter, r *http.Request, view func(context.Context) (operator.ObserverDocument, error)) {
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	doc, err := view(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

func (o *observer) view(ctx context.Context) (operator.ObserverDocument, error) {
	var doc operator.ObserverDocument
	doc.Router.BootGeneration = o.boot.UnixMilli()
	var list upstreamWorkers
	if err := o.getJSON(ctx, "http://"+o.backend+"/workers", &list); err != nil {
		return doc, err
	}
	open, err := o.openCircuits(ctx)
	if err != nil {
		return doc, err
	}
	doc.Workers = []operator.ObserverWorker{}
	for _, wk := range list.Workers {
		ow := operator.ObserverWorker{URL: wk.URL, Role: wk.WorkerType, WorkerID: wk.ID}
		if u, err := url.Parse(wk.URL); err == nil && u.Port() != "" {
			ow.Port = operator.ObserverPortValue(u.Port())
		}
		ow.Selection = operator.ObserverSelection{Registered: true, Healthy: wk.Healthy, CircuitOpen: open[wk.URL],
			InSelection: wk.Healthy && !open[wk.URL]}
		doc.Workers = append(doc.Workers, ow)
	}
	doc.Router.NowMS = time.Now().UnixMilli()
	return doc, nil
}

// openCircuits are the workers whose circuit-breaker gauge reads open.
func (o *observer) openCircuits(ctx context.Context) (map[string]bool, error) {
	open := map[string]bool{}
	if o.metricsBackend == "" {
		return open, nil
	}
	body, err := o.get(ctx, "http://"+o.metricsBackend+"/metrics")
	if err != nil {
		return nil, err
	}
	samples, err := familySamples(o.metricsBackend, body, cbGauges[o.router])
	if err != nil {
		return nil, err
	}
	for _, s := range samples {
		if s.Value == cbOpen {
			open[s.Labels["worker"]] = true
		}
	}
	return open, nil
}

func (o *observer) getJSON(ctx context.Context, u string, v any) error {
	body, err := o.get(ctx, u)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the router's %s: %w", u, err)
	}
	return nil
}

func (o *observer) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the router's %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("the router's %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the router's %s answered %s: %.200s", u, resp.Status, body)
	}
	return body, nil
}

// withObserver serves the view at operator.ObserverPath and passes
// everything else to next unchanged (no ServeMux: it would redirect paths
// the router itself answers).
func withObserver(o *observer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == operator.ObserverPath {
			o.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
