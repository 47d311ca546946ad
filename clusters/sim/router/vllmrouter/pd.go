package vllmrouter

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
)

// routePD is the vLLM PD router's two-stage request in the direct-URL mode
// that Kubernetes discovery uses (docs/routers.md#corrections): pick a
// prefill and a decode worker, each pool by its own policy instance,
// routing on the typed request's JSON (typedRequest); run the prefill leg
// with max_tokens 1 and the connector's kv_transfer_params, then the
// decode leg, whose answer is the client's. There is no retry executor on
// this path, and no circuit-breaker outcome is recorded: only the regular
// router calls record_outcome (vllm-project/router@v0.1.15:src/routers/http/router.rs).
func (rt *router) routePD(w http.ResponseWriter, r *http.Request, route string, obj map[string]any, stream bool) {
	hdr := forwardHeaders(r.Header)
	hdr.Set("Content-Type", "application/json")
	typed := typedRequest(route, obj)
	rt.pdAttempt(r, route, typed, hdr, serdeString(typed), stream).Write(w, stream)
}

func hostOf(url string) string {
	return strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
}

func uuidSimple() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (rt *router) pdAttempt(r *http.Request, route string, obj map[string]any, hdr http.Header, txt string, stream bool) httpx.Outcome {
	start := time.Now()
	if nPre, nDec := len(rt.urlsOf(workers.Prefill)), len(rt.urlsOf(workers.Decode)); nPre == 0 || nDec == 0 {
		return httpx.RouterText(http.StatusServiceUnavailable, fmt.Sprintf("No workers available: %d prefill, %d decode", nPre, nDec))
	}
	pre := rt.pick(rt.pols.Prefill, workers.Prefill, txt, r.Header)
	if pre == nil {
		return httpx.RouterText(http.StatusServiceUnavailable, "Prefill policy failed to select a worker")
	}
	dec := rt.pick(rt.pols.Decode, workers.Decode, txt, r.Header)
	if dec == nil {
		return httpx.RouterText(http.StatusServiceUnavailable, "Decode policy failed to select a worker")
	}
	// The counters move once the decode leg has answered (or failed).
	finished := func(decoded bool) {
		rt.m.pdRequests.WithLabelValues(route).Inc()
		rt.m.pdDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		rt.m.pdPrefill.WithLabelValues(pre.URL()).Inc()
		if decoded {
			rt.m.pdDecode.WithLabelValues(dec.URL()).Inc()
		}
	}

	reqID := "___prefill_addr_" + hostOf(pre.URL()) + "___decode_addr_" + hostOf(dec.URL()) + "_" + uuidSimple()
	transferID := ""
	if rt.cfg.kvConnector == "mooncake" {
		transferID = "xfer-" + uuidSimple()
	}

	// Prefill leg: one token, no stream, the connector's send-side params.
	preReq := cloneMap(obj)
	preReq["max_tokens"] = 1
	if _, ok := preReq["max_completion_tokens"]; ok {
		preReq["max_completion_tokens"] = 1
	}
	preReq["stream"] = false
	delete(preReq, "stream_options")
	switch rt.cfg.kvConnector {
	case "mooncake":
		preReq["kv_transfer_params"] = map[string]any{"do_remote_decode": true, "do_remote_prefill": false, "transfer_id": transferID}
	default:
		preReq["kv_transfer_params"] = map[string]any{"do_remote_decode": true, "do_remote_prefill": false,
			"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil}
	}
	preBody, _ := json.Marshal(preReq)
	h := hdr.Clone()
	h.Set("X-Request-Id", reqID)
	preLoad := rt.countLoad(pre)
	pres := httpx.Send(r.Context(), rt.client, http.MethodPost, pre.URL()+route, preBody, h, false, nil)
	preLoad()
	if pres.Err != nil {
		// A failed prefill counts the request and the prefill error only.
		rt.m.pdPrefillErrors.WithLabelValues(pre.URL()).Inc()
		rt.m.pdRequests.WithLabelValues(route).Inc()
		rt.m.pdDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		return httpx.RouterText(http.StatusInternalServerError, "Request processing failed: Prefill request failed to "+hostOf(pre.URL())+": "+pres.Err.Error())
	}
	// The prefill answer's status is not checked: the decode leg runs.

	// Decode leg: the original request plus the receive-side params.
	decReq := cloneMap(obj)
	switch rt.cfg.kvConnector {
	case "mooncake":
		if pre.BootstrapPort != nil {
			host := hostOf(pre.URL())
			if i := strings.LastIndex(host, ":"); i >= 0 {
				host = host[:i]
			}
			decReq["kv_transfer_params"] = map[string]any{"do_remote_decode": false, "do_remote_prefill": true,
				"transfer_id": transferID, "remote_bootstrap_addr": "http://" + host + ":" + itoa(*pre.BootstrapPort), "remote_engine_id": ""}
		}
	default:
		var pr map[string]any
		if json.Unmarshal(pres.Body, &pr) == nil {
			if kv, ok := pr["kv_transfer_params"]; ok && kv != nil {
				decReq["kv_transfer_params"] = kv
			}
		}
	}
	decBody, _ := json.Marshal(decReq)
	decLoad := rt.countLoad(dec)
	dres := httpx.Send(r.Context(), rt.client, http.MethodPost, dec.URL()+route, decBody, h, stream, routerbase.Retryable)
	// The decode load drops when the response headers arrive, not when a
	// stream ends.
	decLoad()
	if dres.Err != nil {
		rt.m.pdDecodeErrors.WithLabelValues(dec.URL()).Inc()
		finished(false)
		return httpx.RouterText(http.StatusInternalServerError, "Request processing failed: Decode request failed to "+hostOf(dec.URL())+": "+dres.Err.Error())
	}
	finished(true)
	if dres.Status/100 != 2 {
		rt.m.pdDecodeErrors.WithLabelValues(dec.URL()).Inc()
	}
	if dres.Live != nil {
		return httpx.Outcome{Status: dres.Status, Header: dres.Header, Live: dres.Live}
	}
	return httpx.Outcome{Status: dres.Status, Header: dres.Header, Body: dres.Body}
}

// countLoad increments the worker's load for the leg it serves, whatever
// the pool's policy, and returns the matching decrement. The P/D router
// never sets vllm_router_running_requests.
func (rt *router) countLoad(w *workers.Worker) func() {
	w.IncLoad()
	var once sync.Once
	return func() { once.Do(func() { w.DecLoad() }) }
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
