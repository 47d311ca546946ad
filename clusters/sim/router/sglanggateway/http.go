package sglanggateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// errNoWorkers is the message of SG's no_available_workers error.
const errNoWorkers = "No available workers (all circuits open or unhealthy)"

// handler is build_app: protected and public routes, admin routes, the
// operator's observer view under the request-id and HTTP-metrics layers,
// and a 404 fallback outside them.
func (rt *router) handler() http.Handler {
	mux := http.NewServeMux()
	post := func(path string, h http.HandlerFunc) { mux.HandleFunc(path, httpx.Only(http.MethodPost, "POST", h)) }
	get := func(path string, h http.HandlerFunc) { mux.HandleFunc(path, httpx.Only(http.MethodGet, "GET", h)) }

	post("/generate", rt.typed("/generate", plainJSON))
	post("/v1/chat/completions", rt.typed("/v1/chat/completions", validatedJSON))
	post("/v1/completions", rt.typed("/v1/completions", plainJSON))
	post("/v1/responses", rt.typed("/v1/responses", validatedJSON))
	post("/v1/embeddings", rt.typed("/v1/embeddings", plainJSON))
	post("/rerank", rt.typed("/v1/rerank", validatedJSON))
	post("/v1/rerank", rt.typed("/v1/rerank", plainJSON))
	post("/v1/classify", rt.typed("/v1/classify", plainJSON))

	get("/liveness", func(w http.ResponseWriter, r *http.Request) { httpx.Text(w, http.StatusOK, "OK") })
	get("/health", func(w http.ResponseWriter, r *http.Request) { httpx.Text(w, http.StatusOK, "OK") })
	get("/readiness", rt.readiness)
	get("/health_generate", rt.healthGenerate)
	get("/v1/models", rt.models)
	get("/get_model_info", rt.modelInfo)
	get("/get_server_info", rt.serverInfo)
	get("/get_loads", rt.getLoads)
	get("/workers", rt.listWorkers)
	get(routerbase.ObserverPath, routerbase.ObserverHandler(rt.boot, rt.pending.Observe(rt.reg)).ServeHTTP)

	routes := httpx.RequestID(rt.cfg.RequestIDHeaders, true, rt.httpMetrics(httpx.LimitBody(rt.cfg.MaxPayload, mux)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			// build_app adds its fallback (sink_handler, a bare 404) after
			// its layers, so an unknown path gets no request id and counts
			// in no HTTP series (sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/server.rs).
			w.WriteHeader(http.StatusNotFound)
			return
		}
		routes.ServeHTTP(w, r)
	})
}

// httpMetrics is the HTTP layer's series: the request when it arrives, the
// response (status and X-SMG-Error-Code) and the duration when it is done;
// the active-connections gauge is the requests being handled, set when one
// starts and when one ends (HttpMetricsMiddleware,
// sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/middleware.rs).
func (rt *router) httpMetrics(next http.Handler) http.Handler {
	var active atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		path := normalizePath(r.URL.Path)
		rt.m.httpRequests.WithLabelValues(r.Method, path).Inc()
		rt.m.httpConnections.Set(float64(active.Add(1)))
		defer func() { rt.m.httpConnections.Set(float64(active.Add(-1))) }()
		defer rt.inflight.track()()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		rt.m.httpResponses.WithLabelValues(strconv.Itoa(sw.status), sw.Header().Get("X-SMG-Error-Code")).Inc()
		rt.m.httpDuration.WithLabelValues(r.Method, path).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// smgError is routers::error::create_error: JSON
// {"error":{"type","code","message"}} plus X-SMG-Error-Code.
func smgError(status int, code, message string) httpx.Outcome {
	body := httpx.Ordered("error", json.RawMessage(httpx.Ordered("type", canonicalReason(status), "code", code, "message", message)))
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-SMG-Error-Code", code)
	return httpx.Outcome{Status: status, Header: h, Body: body, RouterMade: true}
}

// canonicalReason is http::StatusCode::canonical_reason.
func canonicalReason(status int) string {
	if s := http.StatusText(status); s != "" {
		return s
	}
	return "Unknown Status Code"
}

func (rt *router) readiness(w http.ResponseWriter, r *http.Request) {
	all := rt.reg.All()
	healthy := 0
	var hasPre, hasDec bool
	for _, wk := range all {
		if wk.Healthy() {
			healthy++
			hasPre = hasPre || wk.Role() == workers.Prefill
			hasDec = hasDec || wk.Role() == workers.Decode
		}
	}
	ready := healthy > 0
	if !rt.cfg.EnableIGW && rt.cfg.PD {
		ready = hasPre && hasDec
	}
	if ready {
		writeRaw(w, http.StatusOK, httpx.Ordered("status", "ready", "healthy_workers", healthy, "total_workers", len(all)))
		return
	}
	writeRaw(w, http.StatusServiceUnavailable, httpx.Ordered("status", "not ready", "reason", "insufficient healthy workers"))
}

func (rt *router) healthGenerate(w http.ResponseWriter, r *http.Request) {
	for _, wk := range rt.reg.All() {
		if wk.Healthy() {
			httpx.Text(w, http.StatusOK, "At least one router has healthy workers")
			return
		}
	}
	httpx.Text(w, http.StatusServiceUnavailable, "No routers with healthy workers available")
}

// models is the IGW registry's model list.
func (rt *router) models(w http.ResponseWriter, r *http.Request) {
	names := rt.modelNames()
	if len(names) == 0 {
		httpx.Text(w, http.StatusServiceUnavailable, "No models available")
		return
	}
	data := make([]json.RawMessage, len(names))
	for i, n := range names {
		data[i] = httpx.Ordered("id", n, "object", "model", "owned_by", "local")
	}
	raw, _ := json.Marshal(data)
	body := httpx.Ordered("object", "list", "data", json.RawMessage(raw))
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (rt *router) modelNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, wk := range rt.reg.All() {
		if !seen[wk.ModelID] {
			seen[wk.ModelID] = true
			names = append(names, wk.ModelID)
		}
	}
	return names
}

func (rt *router) serverInfo(w http.ResponseWriter, r *http.Request) {
	httpx.Text(w, http.StatusOK, string(httpx.Ordered("router_manager", true, "routers_count", 5, "workers_count", len(rt.reg.All()))))
}

// modelInfo proxies to the first healthy worker (the default router's
// proxy_get_request).
func (rt *router) modelInfo(w http.ResponseWriter, r *http.Request) {
	var first *workers.Worker
	for _, wk := range rt.reg.All() {
		if wk.Healthy() {
			first = wk
			break
		}
	}
	if first == nil {
		smgError(http.StatusServiceUnavailable, "no_workers", "No workers are available").Write(w, false)
		return
	}
	res := httpx.Send(r.Context(), rt.client, http.MethodGet, first.URL()+"/get_model_info", nil, forwardHeaders(r.Header), false, nil)
	if res.Err != nil {
		smgError(http.StatusInternalServerError, "call_upstream_request_error", res.Err.Error()).Write(w, false)
		return
	}
	httpx.Outcome{Status: res.Status, Header: res.Header, Body: res.Body}.Write(w, false)
}

func (rt *router) listWorkers(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		ID        string `json:"id"`
		URL       string `json:"url"`
		ModelID   string `json:"model_id"`
		Type      string `json:"worker_type"`
		IsHealthy bool   `json:"is_healthy"`
		Load      int64  `json:"load"`
	}
	list := []entry{}
	for _, wk := range rt.reg.All() {
		list = append(list, entry{wk.ID, wk.URL(), wk.ModelID, string(wk.Role()), wk.Healthy(), wk.Load()})
	}
	b, _ := json.Marshal(map[string]any{"workers": list, "total": len(list)})
	writeRaw(w, http.StatusOK, b)
}

// forwardHeaders keeps only the headers SG forwards to workers.
func forwardHeaders(in http.Header) http.Header {
	out := http.Header{}
	for k, vs := range in {
		l := strings.ToLower(k)
		switch {
		case l == "authorization", l == "x-request-id", l == "x-correlation-id", l == "traceparent",
			l == "tracestate", l == "x-smg-routing-key", strings.HasPrefix(l, "x-request-id-"):
			out[k] = append([]string(nil), vs...)
		}
	}
	return out
}

// Extractors of the typed routes: axum's Json, or the gateway's
// ValidatedJson (chat, responses, /rerank), whose rejections are JSON.
const (
	plainJSON     = false
	validatedJSON = true
)

// rejected answers an extractor rejection: axum's plain text for a Json
// route, a 400 JSON error for a ValidatedJson one
// (sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/protocols/validated.rs).
func rejected(w http.ResponseWriter, validated bool, rej *httpx.Rejection) {
	if !validated {
		httpx.Text(w, rej.Status, rej.Text)
		return
	}
	msg := "Failed to parse JSON: " + rej.Text
	switch rej.Kind {
	case httpx.DataError:
		msg = "Invalid JSON data: " + rej.Text
	case httpx.SyntaxError:
		msg = "JSON syntax error: " + rej.Text
	case httpx.MissingContentType:
		msg = "Missing Content-Type: application/json header"
	}
	invalid(w, msg, "json_parse_error")
}

// invalid is ValidatedJson's 400: {"error":{"message","type","code"}}.
func invalid(w http.ResponseWriter, message string, code any) {
	writeRaw(w, http.StatusBadRequest, httpx.Ordered("error", json.RawMessage(httpx.Ordered(
		"message", message, "type", "invalid_request_error", "code", code))))
}

// typed is the IGW RouterManager path plus route_typed_request.
func (rt *router) typed(route string, validated bool) http.HandlerFunc {
	var required []string
	switch route {
	case "/v1/chat/completions":
		required = []string{"messages"}
	case "/v1/completions":
		required = []string{"model", "prompt"}
	case "/v1/embeddings", "/v1/classify":
		required = []string{"model", "input"}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, obj, rej := httpx.DecodeJSON(r, required...)
		if rej != nil {
			rejected(w, validated, rej)
			return
		}
		stream, _ := obj["stream"].(bool)
		model, hasModel := obj["model"].(string)
		if !hasModel && (route == "/v1/chat/completions" || route == "/v1/responses") {
			// ChatCompletionRequest's model defaults to UNKNOWN_MODEL_ID.
			model, hasModel = unknownModel, true
		}
		if route == "/v1/chat/completions" {
			if msgs, _ := obj["messages"].([]any); len(msgs) == 0 {
				// validate_messages, as the validator crate's errors print.
				invalid(w, "messages: Validation error: messages cannot be empty [{\"value\": Array []}]", 400)
				return
			}
		}
		// resolve_model_id: a missing model is the only model, if one.
		if !hasModel && rt.cfg.EnableIGW {
			names := rt.modelNames()
			switch len(names) {
			case 0:
				httpx.Text(w, http.StatusServiceUnavailable, "No models available - no workers registered")
				return
			case 1:
				model = names[0]
			default:
				httpx.Text(w, http.StatusBadRequest, "Model must be specified. Available models: "+strings.Join(names, ", "))
				return
			}
		}
		pd, ok := rt.selectRouter(model)
		if !ok {
			httpx.Text(w, http.StatusNotFound, "Model '"+model+"' not found or no router available")
			return
		}
		if pd {
			rt.routePD(w, r, route, obj, model, stream)
			return
		}
		rt.routeRegular(w, r, route, body, obj, model, stream)
	}
}

// selectRouter is select_router_for_request for a model: the PD router when
// the model's workers are prefill/decode ones, else the default HTTP
// regular router; a router is usable only if the registry holds workers of
// its kind.
func (rt *router) selectRouter(model string) (pd bool, ok bool) {
	var regular, pdCount, modelPD, modelAny int
	for _, wk := range rt.reg.All() {
		isPD := wk.Role() != workers.Regular
		if isPD {
			pdCount++
		} else {
			regular++
		}
		if !rt.cfg.EnableIGW || wk.ModelID == model {
			modelAny++
			if isPD {
				modelPD++
			}
		}
	}
	if !rt.cfg.EnableIGW {
		if rt.cfg.PD {
			return true, true
		}
		return false, true
	}
	pd = modelAny > 0 && modelPD > 0
	if pd {
		return true, pdCount > 0
	}
	return false, regular > 0
}

func routeText(route string, obj map[string]any) string {
	switch route {
	case "/v1/chat/completions":
		return chatText(obj)
	case "/v1/completions":
		return promptText(obj["prompt"])
	case "/generate":
		return generateText(obj)
	case "/v1/rerank":
		s, _ := obj["query"].(string)
		return s
	}
	return promptText(obj["input"])
}

func (rt *router) candidates(model string, role workers.Role) []*workers.Worker {
	var out []*workers.Worker
	for _, wk := range rt.reg.All() {
		if wk.Role() != role {
			continue
		}
		if rt.cfg.EnableIGW && wk.ModelID != model {
			continue
		}
		if wk.Available() {
			out = append(out, wk)
		}
	}
	return out
}

// selected records a pick: worker_selection_total and the branch counters.
func (rt *router) selected(workerType, model string, pol policy.Policy) {
	rt.m.selection.WithLabelValues(workerType, "http", model, pol.Name()).Inc()
}

func (rt *router) branch(pol policy.Policy, d policy.Decision) {
	if d.Branch == "" {
		return
	}
	switch pol.Name() {
	case policy.Manual:
		rt.m.manualBranch.WithLabelValues(d.Branch).Inc()
		if ce, ok := pol.(policy.CacheEntries); ok {
			rt.m.manualEntries.Set(float64(ce.CacheEntries()))
		}
	case policy.PrefixHash:
		rt.m.prefixBranch.WithLabelValues(d.Branch).Inc()
	}
}

// recordOutcome feeds the circuit breaker: SG counts only 2xx as success.
func (rt *router) recordOutcome(w *workers.Worker, status int) {
	rt.m.cb.Record(rt.reg, w, status/100 == 2)
}

// routeRegular is the HTTP regular router's route_typed_request.
func (rt *router) routeRegular(w http.ResponseWriter, r *http.Request, route string, body []byte, obj map[string]any, model string, stream bool) {
	start := time.Now()
	endpoint := routeToEndpoint(route)
	rt.m.routerRequests.WithLabelValues("http", "regular", "http", model, endpoint, strconv.FormatBool(stream)).Inc()
	hdr := forwardHeaders(r.Header)
	hdr.Set("Content-Type", "application/json")
	txt := routeText(route, obj)
	out := routerbase.Retry(r.Context(), rt.retryCfg,
		func(uint32) httpx.Outcome {
			o := rt.attempt(r, route, body, hdr, txt, model, stream)
			rt.m.upstreamResp.WithLabelValues("http", strconv.Itoa(o.Status), errorCode(o)).Inc()
			return o
		},
		func(o httpx.Outcome) bool {
			if routerbase.Retryable(o.Status) {
				// The dropped response releases its load guard.
				if o.Done != nil {
					o.Done()
				}
				return true
			}
			return false
		},
		func(d time.Duration, next uint32) {
			rt.m.retries.WithLabelValues("regular", endpoint).Inc()
			rt.m.backoff(d, next)
		},
		func() { rt.m.retriesExhausted.WithLabelValues("regular", endpoint).Inc() })
	if out.Status/100 == 2 {
		rt.m.routerDuration.WithLabelValues("http", "regular", "http", model, endpoint).Observe(time.Since(start).Seconds())
	} else if !routerbase.Retryable(out.Status) {
		rt.m.routerErrors.WithLabelValues("http", "regular", "http", model, endpoint, errorTypeFromStatus(out.Status)).Inc()
	}
	if routerbase.Retryable(out.Status) {
		out.Done = nil // already released
	}
	out.Write(w, stream)
}

func errorCode(o httpx.Outcome) string {
	if o.Header == nil {
		return ""
	}
	return o.Header.Get("X-SMG-Error-Code")
}

// attempt is route_typed_request_once: select_worker_for_model (policy
// re-run on every attempt), the load guard under cache_aware, send.
func (rt *router) attempt(r *http.Request, route string, body []byte, hdr http.Header, txt, model string, stream bool) httpx.Outcome {
	avail := rt.candidates(model, workers.Regular)
	if len(avail) == 0 {
		return smgError(http.StatusServiceUnavailable, "no_available_workers", errNoWorkers)
	}
	d := rt.pols.Regular.Select(workers.AsPolicy(avail), policy.Request{Text: txt, Headers: r.Header, Model: model})
	rt.branch(rt.pols.Regular, d)
	if d.Index < 0 || d.Index >= len(avail) {
		return smgError(http.StatusServiceUnavailable, "no_available_workers", errNoWorkers)
	}
	wk := avail[d.Index]
	rt.selected("regular", model, rt.pols.Regular)
	release := func() {}
	if rt.pols.Regular.Name() == policy.CacheAware {
		rt.m.requestsActive.WithLabelValues(wk.URL()).Set(float64(wk.IncLoad()))
		released := false
		release = func() {
			if !released {
				released = true
				rt.m.requestsActive.WithLabelValues(wk.URL()).Set(float64(wk.DecLoad()))
			}
		}
	}
	res := httpx.Send(r.Context(), rt.client, http.MethodPost, wk.URL()+route, body, hdr, stream, routerbase.Retryable)
	var out httpx.Outcome
	switch {
	case res.Err != nil && res.ReadErr:
		out = smgError(http.StatusInternalServerError, "read_response_body_failed", "Failed to read response body: "+res.Err.Error())
	case res.Err != nil:
		out = smgError(http.StatusInternalServerError, "call_upstream_request_error", res.Err.Error()+". URL: "+wk.URL()+route)
	case res.Live != nil:
		out = httpx.Outcome{Status: res.Status, Header: res.Header, Live: res.Live}
	default:
		out = httpx.Outcome{Status: res.Status, Header: res.Header, Body: res.Body}
	}
	out.Done = release
	rt.recordOutcome(wk, out.Status)
	if out.Status/100 == 5 {
		rt.m.workerErrors.WithLabelValues("regular", "http", errorTypeFromStatus(out.Status)).Inc()
	}
	return out
}
