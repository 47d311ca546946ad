package vllmrouter

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routerbase"
	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/workers"
	"github.com/gpustack/routing-conformance/clusters/sim/router/policy"
)

// routePD is the vLLM PD router's two-stage request: pick a prefill and a
// decode worker (each pool by its own policy, routing on the whole request
// JSON), run the prefill leg with max_tokens 1 and the connector's
// kv_transfer_params, then the decode leg, whose answer is the client's.
func (rt *router) routePD(w http.ResponseWriter, r *http.Request, route string, body []byte, obj map[string]any, stream bool) {
	start := time.Now()
	var compact bytes.Buffer
	if json.Compact(&compact, body) != nil {
		compact.Reset()
		compact.Write(body)
	}
	txt := compact.String()
	hdr := forwardHeaders(r.Header)
	hdr.Set("Content-Type", "application/json")
	out := rt.withRetries(r, route, func() httpx.Outcome { return rt.pdAttempt(r, route, obj, hdr, txt, stream) })
	if out.Status/100 == 2 {
		rt.m.pdRequests.WithLabelValues(route).Inc()
		rt.m.pdDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}
	out.Write(w, stream)
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
	pre := rt.pick(rt.pols.Prefill, workers.Prefill, txt, r.Header)
	if pre == nil {
		rt.m.pdErrors.WithLabelValues("no_prefill_workers").Inc()
		return httpx.RouterText(http.StatusServiceUnavailable, "No available prefill workers")
	}
	dec := rt.pick(rt.pols.Decode, workers.Decode, txt, r.Header)
	if dec == nil {
		rt.m.pdErrors.WithLabelValues("no_decode_workers").Inc()
		return httpx.RouterText(http.StatusServiceUnavailable, "No available decode workers")
	}
	rt.m.pdPrefill.WithLabelValues(pre.URL()).Inc()
	rt.m.pdDecode.WithLabelValues(dec.URL()).Inc()

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
	preLoad := rt.countLoad(rt.pols.Prefill, pre)
	pres := httpx.Send(r.Context(), rt.client, http.MethodPost, pre.URL()+route, preBody, h, false, nil)
	preLoad()
	if pres.Err != nil || pres.Status/100 != 2 {
		rt.m.pdPrefillErrors.WithLabelValues(pre.URL()).Inc()
		st := http.StatusInternalServerError
		msg := "Prefill server error"
		if pres.Err != nil {
			msg += ": " + pres.Err.Error()
		} else {
			st = pres.Status
			msg += ": " + string(pres.Body)
		}
		rt.recordOutcome(pre, st)
		return httpx.RouterText(st, msg)
	}
	rt.recordOutcome(pre, pres.Status)

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
	decLoad := rt.countLoad(rt.pols.Decode, dec)
	dres := httpx.Send(r.Context(), rt.client, http.MethodPost, dec.URL()+route, decBody, h, stream, routerbase.Retryable)
	var out httpx.Outcome
	switch {
	case dres.Err != nil:
		decLoad()
		rt.m.pdDecodeErrors.WithLabelValues(dec.URL()).Inc()
		out = httpx.RouterText(http.StatusInternalServerError, "Decode server error: "+dres.Err.Error())
	case dres.Live != nil:
		var once sync.Once
		out = httpx.Outcome{Status: dres.Status, Header: dres.Header, Live: dres.Live, Done: func() { once.Do(decLoad) }}
	default:
		decLoad()
		if dres.Status/100 != 2 {
			rt.m.pdDecodeErrors.WithLabelValues(dec.URL()).Inc()
		}
		out = httpx.Outcome{Status: dres.Status, Header: dres.Header, Body: dres.Body}
	}
	rt.recordOutcome(dec, out.Status)
	return out
}

// countLoad increments the worker's load when its pool's policy is
// cache_aware and returns the matching decrement.
func (rt *router) countLoad(pol policy.Policy, w *workers.Worker) func() {
	if pol.Name() != policy.CacheAware {
		return func() {}
	}
	rt.m.running.WithLabelValues(w.URL()).Set(float64(w.IncLoad()))
	return func() { rt.m.running.WithLabelValues(w.URL()).Set(float64(w.DecLoad())) }
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
