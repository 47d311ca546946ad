package sglanggateway

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// pdText is the PD router's routing text: the first message only for chat,
// the first prompt for completions, text for generate.
func pdText(route string, obj map[string]any) string {
	switch route {
	case "/v1/chat/completions":
		return pdChatText(obj)
	case "/v1/completions":
		return pdPromptText(obj["prompt"])
	case "/generate":
		s, _ := obj["text"].(string)
		return s
	case "/v1/rerank":
		s, _ := obj["query"].(string)
		return s
	}
	return ""
}

// routePD is the HTTP PD router's execute_dual_dispatch: pick a prefill and
// a decode worker (each pool by its policy), inject bootstrap_host /
// bootstrap_port / bootstrap_room, send the same request to both at once,
// answer with the decode worker's response.
func (rt *router) routePD(w http.ResponseWriter, r *http.Request, route string, obj map[string]any, model string, stream bool) {
	start := time.Now()
	endpoint := routeToEndpoint(route)
	rt.m.routerRequests.WithLabelValues("http", "pd", "http", model, endpoint, strconv.FormatBool(stream)).Inc()
	hdr := forwardHeaders(r.Header)
	hdr.Set("Content-Type", "application/json")
	txt := pdText(route, obj)
	out := routerbase.Retry(r.Context(), rt.retryCfg,
		func(uint32) httpx.Outcome { return rt.pdAttempt(r, route, obj, hdr, txt, model, stream) },
		func(o httpx.Outcome) bool { return routerbase.Retryable(o.Status) },
		func(d time.Duration, next uint32) {
			rt.m.retries.WithLabelValues("prefill", endpoint).Inc()
			rt.m.retries.WithLabelValues("decode", endpoint).Inc()
			rt.m.backoff(d, next)
		},
		func() {
			rt.m.retriesExhausted.WithLabelValues("prefill", endpoint).Inc()
			rt.m.retriesExhausted.WithLabelValues("decode", endpoint).Inc()
		})
	if out.Status/100 == 2 {
		rt.m.routerDuration.WithLabelValues("http", "pd", "http", model, endpoint).Observe(time.Since(start).Seconds())
	} else if !routerbase.Retryable(out.Status) {
		rt.m.routerErrors.WithLabelValues("http", "pd", "http", model, endpoint, errorTypeFromStatus(out.Status)).Inc()
	}
	out.Write(w, stream)
}

func (rt *router) pdPick(pol policy.Policy, role workers.Role, r *http.Request, txt, model string) (*workers.Worker, string) {
	avail := rt.candidates(model, role)
	if len(avail) == 0 {
		return nil, "No available " + string(role) + " workers (all circuits open or unhealthy)"
	}
	d := pol.Select(workers.AsPolicy(avail), policy.Request{Text: txt, Headers: r.Header, Model: model})
	rt.branch(pol, d)
	if d.Index < 0 || d.Index >= len(avail) {
		return nil, "Policy " + pol.Name() + " failed to select a " + string(role) + " worker"
	}
	return avail[d.Index], ""
}

func (rt *router) pdAttempt(r *http.Request, route string, obj map[string]any, hdr http.Header, txt, model string, stream bool) httpx.Outcome {
	pre, msg := rt.pdPick(rt.pols.Prefill, workers.Prefill, r, txt, model)
	if pre == nil {
		return smgError(http.StatusServiceUnavailable, "server_selection_failed", msg)
	}
	dec, msg := rt.pdPick(rt.pols.Decode, workers.Decode, r, txt, model)
	if dec == nil {
		return smgError(http.StatusServiceUnavailable, "server_selection_failed", msg)
	}
	rt.selected("prefill", model, rt.pols.Prefill)
	rt.selected("decode", model, rt.pols.Decode)

	req := make(map[string]any, len(obj)+3)
	for k, v := range obj {
		req[k] = v
	}
	host := strings.TrimPrefix(strings.TrimPrefix(pre.URL(), "http://"), "https://")
	if i := strings.LastIndex(host, ":"); i >= 0 {
		host = strings.Trim(host[:i], "[]")
	}
	req["bootstrap_host"] = host
	if pre.BootstrapPort != nil {
		req["bootstrap_port"] = *pre.BootstrapPort
	} else {
		req["bootstrap_port"] = nil
	}
	req["bootstrap_room"] = rand.Uint64() & (1<<63 - 1)
	body, _ := json.Marshal(req)

	// Both workers hold a load guard whatever the policy: a non-stream
	// request until both answers are in, a stream until its body is dropped
	// (pd_router.rs:542-543 and 887 at lightseekorg/smg@7c3502c6).
	rt.m.requestsActive.WithLabelValues(pre.URL()).Set(float64(pre.IncLoad()))
	rt.m.requestsActive.WithLabelValues(dec.URL()).Set(float64(dec.IncLoad()))
	var once sync.Once
	release := func() {
		once.Do(func() {
			rt.m.requestsActive.WithLabelValues(pre.URL()).Set(float64(pre.DecLoad()))
			rt.m.requestsActive.WithLabelValues(dec.URL()).Set(float64(dec.DecLoad()))
		})
	}
	var wg sync.WaitGroup
	var pres httpx.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		pres = httpx.Send(r.Context(), rt.client, http.MethodPost, pre.URL()+route, body, hdr, false, nil)
	}()
	dres := httpx.Send(r.Context(), rt.client, http.MethodPost, dec.URL()+route, body, hdr, stream, routerbase.Retryable)
	wg.Wait()

	var out httpx.Outcome
	switch {
	case pres.Err != nil:
		if dres.Live != nil {
			_ = dres.Live.Body.Close()
		}
		out = smgError(http.StatusInternalServerError, "prefill_request_failed", "Prefill server error: "+pres.Err.Error())
	case pres.Status/100 != 2:
		if dres.Live != nil {
			_ = dres.Live.Body.Close()
		}
		out = httpx.Outcome{Status: pres.Status, Header: pres.Header, Body: pres.Body}
	case dres.Err != nil:
		out = smgError(http.StatusInternalServerError, "decode_request_failed", "Decode server error: "+dres.Err.Error())
	case dres.Live != nil:
		out = httpx.Outcome{Status: dres.Status, Header: dres.Header, Live: dres.Live, Done: release}
	default:
		out = httpx.Outcome{Status: dres.Status, Header: dres.Header, Body: dres.Body}
	}
	if out.Live == nil {
		release()
	}
	notErr := out.Status/100 == 2 || out.Status/100 == 4
	for _, wk := range []*workers.Worker{pre, dec} {
		rt.recordOutcome(wk, map[bool]int{true: 200, false: 500}[notErr])
	}
	if out.Status/100 == 5 {
		rt.m.workerErrors.WithLabelValues("prefill", "http", errorTypeFromStatus(out.Status)).Inc()
		rt.m.workerErrors.WithLabelValues("decode", "http", errorTypeFromStatus(out.Status)).Inc()
	}
	return out
}
