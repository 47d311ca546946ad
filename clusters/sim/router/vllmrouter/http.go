package vllmrouter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/cli"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/debug"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// errNoWorkers is VR's 503 body when no worker can be selected.
const errNoWorkers = "No available workers (all circuits open or unhealthy)"

// handler is build_app: protected generation routes, public and admin
// routes, the operator's observer view, and the transparent-proxy fallback,
// under the request-id layer.
func (rt *router) handler() http.Handler {
	mux := http.NewServeMux()
	post := func(path string, h http.HandlerFunc) { mux.HandleFunc(path, httpx.Only(http.MethodPost, "POST", h)) }
	get := func(path string, h http.HandlerFunc) { mux.HandleFunc(path, httpx.Only(http.MethodGet, "GET,HEAD", h)) }
	post("/generate", rt.typed("/generate", generateText))
	post("/v1/chat/completions", rt.typed("/v1/chat/completions", chatText))
	post("/v1/completions", rt.typed("/v1/completions", func(b map[string]any) string { return promptText(b["prompt"]) }))
	post("/v1/responses", rt.typed("/v1/responses", func(b map[string]any) string { return promptText(b["input"]) }))
	post("/v1/embeddings", rt.typed("/v1/embeddings", func(b map[string]any) string { return promptText(b["input"]) }))
	post("/rerank", rt.typed("/v1/rerank", func(b map[string]any) string { s, _ := b["query"].(string); return s }))
	post("/v1/rerank", rt.typed("/v1/rerank", func(b map[string]any) string { s, _ := b["query"].(string); return s }))

	get("/liveness", func(w http.ResponseWriter, r *http.Request) { httpx.Text(w, http.StatusOK, "OK") })
	get("/health", rt.health)
	get("/readiness", rt.readiness)
	get("/health_generate", rt.proxyFirst("health_generate"))
	get("/v1/models", rt.proxyFirst("v1/models"))
	get("/get_model_info", rt.proxyFirst("get_model_info"))
	get("/get_server_info", rt.proxyFirst("get_server_info"))
	get("/list_workers", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"urls": nonNil(rt.reg.URLs())})
	})
	get("/get_loads", rt.getLoads)
	post("/add_worker", rt.addWorker)
	post("/remove_worker", rt.removeWorker)
	get(routerbase.ObserverPath, routerbase.ObserverHandler(rt.boot, rt.pending.Observe(rt.reg)).ServeHTTP)
	mux.HandleFunc("/", rt.transparentProxy)

	return httpx.RequestID(rt.cfg.RequestIDHeaders, false, httpx.LimitBody(rt.cfg.MaxPayload, mux))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// writeJSON answers v as JSON. vllm-router builds its own answers with
// serde_json's json! and without preserve_order, so an object's keys come
// out sorted, as encoding/json writes a map's
// (vllm-project/router@v0.1.15:Cargo.toml; src/routers/http/router.rs readiness).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (rt *router) health(w http.ResponseWriter, r *http.Request) {
	var bad []string
	for _, wk := range rt.reg.All() {
		if !wk.Healthy() {
			bad = append(bad, wk.URL())
		}
	}
	if len(bad) == 0 {
		httpx.Text(w, http.StatusOK, "All servers healthy")
		return
	}
	httpx.Text(w, http.StatusServiceUnavailable, "Unhealthy servers: "+debug.StrVec(bad))
}

func (rt *router) readiness(w http.ResponseWriter, r *http.Request) {
	all := rt.reg.All()
	healthy := 0
	for _, wk := range all {
		if wk.Healthy() {
			healthy++
		}
	}
	if healthy > 0 {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "healthy_workers": healthy, "total_workers": len(all)})
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "reason": "no healthy workers available", "total_workers": len(all)})
}

// forwardHeaders are the client headers VR passes on: all of them but
// Content-Type/Content-Length (reqwest's .json() sets those) and the trace
// headers (a fresh context is injected instead).
func forwardHeaders(in http.Header) http.Header {
	out := http.Header{}
	for k, vs := range in {
		switch strings.ToLower(k) {
		case "content-type", "content-length", "traceparent", "tracestate", "baggage":
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// proxyFirst is proxy_get_request: GET the path from the first worker in
// registry order and answer with its status, headers and body.
func (rt *router) proxyFirst(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		all := rt.reg.All()
		if len(all) == 0 {
			httpx.Text(w, http.StatusServiceUnavailable, "No workers are available")
			return
		}
		res := httpx.Send(r.Context(), rt.client, http.MethodGet, all[0].URL()+"/"+path, nil, forwardHeaders(r.Header), false, nil)
		if res.Err != nil {
			if res.ReadErr {
				httpx.Text(w, http.StatusInternalServerError, "Failed to read response: "+res.Err.Error())
				return
			}
			httpx.Text(w, http.StatusInternalServerError, "Request failed: "+res.Err.Error())
			return
		}
		httpx.CopyResponseHeaders(w.Header(), res.Header)
		w.Header().Set("Content-Length", strconv.Itoa(len(res.Body)))
		w.WriteHeader(res.Status)
		_, _ = w.Write(res.Body)
	}
}

// getLoads polls every worker's /get_load ("load" field; -1 when it fails).
func (rt *router) getLoads(w http.ResponseWriter, r *http.Request) {
	// Keys in json!'s sorted order: load, worker.
	type entry struct {
		Load   int64  `json:"load"`
		Worker string `json:"worker"`
	}
	list := []entry{}
	for _, u := range rt.reg.URLs() {
		load := int64(-1)
		res := httpx.Send(r.Context(), rt.client, http.MethodGet, u+"/get_load", nil, nil, false, nil)
		if res.Err == nil && res.Status/100 == 2 {
			var v struct {
				Load *int64 `json:"load"`
			}
			if json.Unmarshal(res.Body, &v) == nil && v.Load != nil {
				load = *v.Load
			}
		}
		list = append(list, entry{load, u})
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": list})
}

func (rt *router) addWorker(w http.ResponseWriter, r *http.Request) {
	u := r.URL.Query().Get("url")
	if u == "" {
		httpx.Text(w, http.StatusBadRequest, "Worker URL required. Provide 'url' query parameter")
		return
	}
	if rt.reg.Get(u) != nil {
		httpx.Text(w, http.StatusBadRequest, "Worker "+u+" already exists")
		return
	}
	if !workers.Probe(r.Context(), rt.probe, u+"/health", cli.Secs(rt.cfg.StartupTimeout)) {
		httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("Timeout %ds waiting for worker %s to become healthy", rt.cfg.StartupTimeout, u))
		return
	}
	rt.admit(u, 0, workers.Regular, "", "", nil)
	httpx.Text(w, http.StatusOK, "Successfully added worker: "+u)
}

func (rt *router) removeWorker(w http.ResponseWriter, r *http.Request) {
	u := r.URL.Query().Get("url")
	if u == "" {
		httpx.Text(w, http.StatusBadRequest, "Worker URL required. Provide 'url' query parameter")
		return
	}
	rt.remove(u)
	httpx.Text(w, http.StatusOK, "Successfully removed worker: "+u)
}

func (rt *router) available(role workers.Role) []*workers.Worker {
	var out []*workers.Worker
	for _, w := range rt.pool(role) {
		if w.Available() {
			out = append(out, w)
		}
	}
	return out
}

// pick runs pol over role's available workers and records the pick; nil
// when none is available or the policy selects none.
func (rt *router) pick(pol policy.Policy, role workers.Role, txt string, h http.Header) *workers.Worker {
	avail := rt.available(role)
	if len(avail) == 0 {
		return nil
	}
	d := pol.Select(workers.AsPolicy(avail), policy.Request{Text: txt, Headers: h})
	if d.Index < 0 || d.Index >= len(avail) {
		return nil
	}
	wk := avail[d.Index]
	if d.Record {
		rt.m.pick(pol.Name(), wk.URL())
	}
	return wk
}

// recordOutcome feeds the circuit breaker: VR counts 2xx and 4xx as
// successes (client errors are not worker failures).
func (rt *router) recordOutcome(w *workers.Worker, status int) {
	rt.m.cb.Record(rt.reg, w, status/100 == 2 || status/100 == 4)
}

// typed is route_typed_request for one generation route.
func (rt *router) typed(route string, textOf func(map[string]any) string) http.HandlerFunc {
	var required []string
	switch route {
	case "/v1/chat/completions":
		required = []string{"messages"}
	case "/v1/completions":
		required = []string{"prompt"}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, obj, ok := httpx.ReadJSON(w, r, required...)
		if !ok {
			return
		}
		stream, _ := obj["stream"].(bool)
		if rt.cfg.PD {
			rt.routePD(w, r, route, obj, stream)
			return
		}
		start := time.Now()
		hdr := forwardHeaders(r.Header)
		hdr.Set("Content-Type", "application/json")
		txt := textOf(obj)
		out := rt.withRetries(r, route, func() httpx.Outcome { return rt.attempt(r, route, body, hdr, txt, stream) })
		if out.Status/100 == 2 {
			rt.m.requests.WithLabelValues(route).Inc()
			rt.m.generateDuration.Observe(time.Since(start).Seconds())
		} else if !routerbase.Retryable(out.Status) {
			rt.m.requestErrors.WithLabelValues(route, "non_retryable_error").Inc()
		}
		out.Write(w, stream)
	}
}

// withRetries is route_typed_request's retry loop around op (the regular
// and the PD router alike): a retryable status runs op again, policy
// included, and counts in the per-route retry series.
func (rt *router) withRetries(r *http.Request, route string, op func() httpx.Outcome) httpx.Outcome {
	return routerbase.Retry(r.Context(), rt.retryCfg,
		func(uint32) httpx.Outcome { return op() },
		func(o httpx.Outcome) bool { return routerbase.Retryable(o.Status) },
		func(d time.Duration, next uint32) {
			rt.m.retries.WithLabelValues(route).Inc()
			rt.m.backoff(d, next)
		},
		func() { rt.m.retriesExhausted.WithLabelValues(route).Inc() })
}

// attempt is one pass of the retry loop: select (re-running the policy),
// count load under cache_aware, send.
func (rt *router) attempt(r *http.Request, route string, body []byte, hdr http.Header, txt string, stream bool) httpx.Outcome {
	avail := rt.available(workers.Regular)
	if len(avail) == 0 {
		rt.m.requestErrors.WithLabelValues(route, "no_available_workers").Inc()
		return httpx.RouterText(http.StatusServiceUnavailable, errNoWorkers)
	}
	d := rt.pols.Regular.Select(workers.AsPolicy(avail), policy.Request{Text: txt, Headers: r.Header})
	if d.Index < 0 || d.Index >= len(avail) {
		rt.m.requestErrors.WithLabelValues(route, "no_available_workers").Inc()
		return httpx.RouterText(http.StatusServiceUnavailable, errNoWorkers)
	}
	if d.Imbalanced {
		rt.m.lbEvents.Inc()
		rt.m.maxLoad.Set(float64(d.MaxLoad))
		rt.m.minLoad.Set(float64(d.MinLoad))
	}
	wk := avail[d.Index]
	if d.Record {
		rt.m.pick(rt.pols.Regular.Name(), wk.URL())
	}
	counted := rt.pols.Regular.Name() == policy.CacheAware
	if counted {
		rt.m.running.WithLabelValues(wk.URL()).Set(float64(wk.IncLoad()))
	}
	dec := func() {
		if counted {
			rt.m.running.WithLabelValues(wk.URL()).Set(float64(wk.DecLoad()))
		}
	}
	res := httpx.Send(r.Context(), rt.client, http.MethodPost, wk.URL()+route, body, hdr, stream, routerbase.Retryable)
	var out httpx.Outcome
	switch {
	case res.Err != nil:
		dec()
		if res.ReadErr {
			out = httpx.RouterText(http.StatusInternalServerError, "Failed to get response body: "+res.Err.Error())
		} else {
			out = httpx.RouterText(http.StatusInternalServerError, "Request failed: "+res.Err.Error())
		}
	case res.Live != nil:
		out = httpx.Outcome{Status: res.Status, Header: res.Header, Live: res.Live}
		if counted {
			var once sync.Once
			out.OnChunk = func(b []byte) {
				if bytes.Contains(b, []byte("data: [DONE]")) {
					once.Do(dec)
				}
			}
			out.Done = func() { once.Do(dec) }
		}
	default:
		out = httpx.Outcome{Status: res.Status, Header: res.Header, Body: res.Body}
		// The body was read: send_typed_request decrements here (for a
		// retried stream, its forwarder decrements when dropped).
		dec()
	}
	rt.recordOutcome(wk, out.Status)
	if routerbase.Retryable(out.Status) {
		// route_typed_request decrements again for retryable statuses (a
		// second, saturating decrement, as in the source read).
		dec()
	}
	return out
}

// transparentProxy is the fallback: any other path goes to a worker the
// policy selects (text ""), method, query, headers and body unchanged, and
// the answer is relayed as it comes.
func (rt *router) transparentProxy(w http.ResponseWriter, r *http.Request) {
	wk := rt.pick(rt.pols.Regular, workers.Regular, "", r.Header)
	if wk == nil {
		httpx.Text(w, http.StatusServiceUnavailable, errNoWorkers)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		httpx.Text(w, http.StatusRequestEntityTooLarge, "Failed to buffer the request body: length limit exceeded")
		return
	}
	hdr := http.Header{}
	for k, vs := range r.Header {
		switch strings.ToLower(k) {
		case "content-length", "traceparent", "tracestate", "baggage":
			continue
		}
		hdr[k] = vs
	}
	target := wk.URL() + r.URL.Path
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	var rd []byte
	if len(body) > 0 {
		rd = body
	}
	res := httpx.Send(r.Context(), rt.client, r.Method, target, rd, hdr, true, nil)
	if res.Err != nil {
		httpx.Text(w, http.StatusBadGateway, "Failed to forward request: "+res.Err.Error())
		return
	}
	defer res.Live.Body.Close()
	httpx.CopyResponseHeaders(w.Header(), res.Header)
	w.WriteHeader(res.Status)
	_ = httpx.Relay(w, res.Live.Body, nil)
}
