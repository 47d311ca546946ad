package epp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/gpustack/routing-conformance/sim/llmd/datalayer"
	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
	"github.com/gpustack/routing-conformance/sim/llmd/extproc"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/scheduling"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
)

// Header names (pkg/epp/metadata/consts.go, pkg/epp/handlers).
const (
	DestinationHeader  = "x-gateway-destination-endpoint"
	requestIDHeader    = "x-request-id"
	fairnessHeader     = "x-llm-d-inference-fairness-id"
	oldFairnessHeader  = "x-gateway-inference-fairness-id"
	modelRewriteHeader = "x-llm-d-model-name-rewrite"
	oldModelRewrite    = "x-gateway-model-name-rewrite"
	// respHeaderMarker is set on every response the EPP processes
	// (handlers/response.go generateResponseHeaders).
	respHeaderMarker = "x-went-into-resp-headers"
)

// Call sites of the ext_proc server's log lines.
const (
	siteReceived    zaplog.Site = "handlers/server.go:433"
	siteResolve     zaplog.Site = "handlers/server.go:464"
	siteParse       zaplog.Site = "handlers/server.go:472"
	siteHandle      zaplog.Site = "handlers/server.go:478"
	siteProcess     zaplog.Site = "handlers/server.go:570"
	siteSentRequest zaplog.Site = "handlers/server.go:715"
	siteSentResp    zaplog.Site = "handlers/server.go:744"
	sitePrepare     zaplog.Site = "requestcontrol/director.go:325"
)

// server is the EPP's ext_proc server and director.
type server struct {
	log        zaplog.Logger
	ds         *datalayer.Datastore
	sched      *scheduling.Scheduler
	producers  []fw.Producer
	preRequest []fw.PreRequest
	parsers    []fw.Parser
	metrics    *eppmetrics.Registry
	rand       *scheduling.Rand
	obs        *observer
	tracing    bool
	active     atomic.Int64
}

// Open implements extproc.Processor.
func (s *server) Open(ctx context.Context) extproc.Stream {
	s.active.Add(1)
	return &stream{s: s, ctx: ctx, log: s.log}
}

// stream is one request's RequestContext.
type stream struct {
	s   *server
	ctx context.Context
	log zaplog.Logger

	labels       eppmetrics.Labels
	received     time.Time
	target       *fw.EndpointMetadata
	running      bool
	streaming    bool
	respHeaders  map[string]string
	buf          []byte
	first, last  time.Time
	completeAt   time.Time
	respSize     int
	usage        usage
	complete     bool
	errCode      string
	window       *window
	closed       bool
	reqProcessed bool
}

type usage struct{ prompt, completion int }

// Request implements extproc.Stream.
func (st *stream) Request(headers map[string]string, body []byte) (extproc.RequestReply, error) {
	st.received = time.Now()
	id := headers[requestIDHeader]
	if id == "" {
		id = uuid.NewString()
		headers[requestIDHeader] = id
	}
	st.log = st.log.WithValues(requestIDHeader, id)
	st.log.V(zaplog.Default).Info(siteReceived, "EPP received request")
	if body == nil {
		return st.fallback()
	}
	reply, err := st.handle(headers, body)
	if err != nil {
		return st.fail(err)
	}
	return reply, nil
}

// fallback routes a body-less request to a random endpoint
// (fallbackToRandomEndpoint).
func (st *stream) fallback() (extproc.RequestReply, error) {
	st.window = st.s.obs.begin()
	eps := st.s.ds.List()
	if len(eps) == 0 {
		return st.fail(fw.Error{Code: fw.CodeInternal, Msg: "no pods available in datastore"})
	}
	e := eps[st.s.rand.IntN(len(eps))]
	st.window.record(e.Meta)
	st.window.finish()
	return extproc.RequestReply{SetHeaders: map[string]string{DestinationHeader: e.Meta.HostPort()}, Destination: e.Meta.HostPort()}, nil
}

// fail turns an error into the ImmediateResponse BuildErrResponse builds;
// an error without an HTTP mapping fails the stream, which Envoy treats as
// a processor failure.
func (st *stream) fail(err error) (extproc.RequestReply, error) {
	if !st.reqProcessed {
		st.reqProcessed = true
		st.s.metrics.RequestProcessing(time.Since(st.received))
	}
	st.log.Error(siteProcess, err, "Failed to process request")
	var e fw.Error
	code := fw.CodeUnknown
	if errors.As(err, &e) {
		code = e.Code
	}
	st.errCode = code
	if st.window != nil {
		st.window.finish()
	}
	status := fw.Error{Code: code}.HTTPStatus()
	if status == 0 {
		return extproc.RequestReply{}, fmt.Errorf("failed to handle request: %w", err)
	}
	return extproc.RequestReply{Immediate: &extproc.Immediate{Status: status, Body: []byte(err.Error())}}, nil
}

func (st *stream) handle(headers map[string]string, body []byte) (extproc.RequestReply, error) {
	s := st.s
	path := requestPath(headers)
	if !s.resolves(path) {
		err := fw.Error{Code: fw.CodeBadRequest, Msg: fmt.Sprintf("no parser registered matching path suffix for: %s", path)}
		st.log.Error(siteResolve, err, "Error resolving parser for request body")
		return extproc.RequestReply{}, err
	}
	parsed, err := parseOpenAI(path, body)
	if err != nil {
		e := fw.Error{Code: fw.CodeBadRequest, Msg: err.Error()}
		st.log.Error(siteParse, e, "Error parsing request")
		return extproc.RequestReply{}, e
	}
	st.labels.Model = parsed.Model
	target := headerValue(headers, modelRewriteHeader, oldModelRewrite)
	if target == "" {
		target = parsed.Model
	}
	st.labels.Target = target
	if target == "" {
		err := fw.Error{Code: fw.CodeBadRequest, Msg: "model not found in request body"}
		st.log.Error(siteHandle, err, "Error handling request")
		return extproc.RequestReply{}, err
	}
	parsed.Payload["model"] = target
	st.labels.Fairness = headerValue(headers, fairnessHeader, oldFairnessHeader)
	st.window = s.obs.begin()
	req := &fw.Request{RequestID: headers[requestIDHeader], TargetModel: target, Headers: headers, Body: parsed}
	res, err := st.schedule(req)
	if err != nil {
		st.log.Error(siteHandle, err, "Error handling request")
		return extproc.RequestReply{}, err
	}
	primary := res.ProfileResults[res.PrimaryProfileName]
	var hosts []string
	for _, e := range primary.TargetEndpoints {
		hosts = append(hosts, e.Meta.HostPort())
		st.window.record(e.Meta)
	}
	if pr := res.ProfileResults["prefill"]; pr != nil && len(pr.TargetEndpoints) > 0 {
		st.window.record(pr.TargetEndpoints[0].Meta)
	}
	st.target = primary.TargetEndpoints[0].Meta
	for _, p := range s.preRequest {
		if err := p.PreRequest(st.ctx, req, res); err != nil {
			return extproc.RequestReply{}, fw.Error{Code: fw.CodeInternal, Msg: err.Error()}
		}
	}
	// repackage: the parser's payload map is marshalled again.
	out, err := json.Marshal(parsed.Payload)
	if err != nil {
		return extproc.RequestReply{}, fw.Error{Code: fw.CodeInternal, Msg: "Error marshalling request body"}
	}
	set := map[string]string{}
	for k, v := range headers {
		if !systemOwned(k) {
			set[k] = v
		}
	}
	set[DestinationHeader] = strings.Join(hosts, ",")
	set["content-length"] = strconv.Itoa(len(out))
	if s.tracing {
		set["traceparent"] = traceparent()
	}
	s.metrics.RequestTotal(st.labels)
	s.metrics.RequestSize(st.labels, len(out))
	st.reqProcessed = true
	s.metrics.RequestProcessing(time.Since(st.received))
	st.log.V(zaplog.Default).Info(siteSentRequest, "EPP sent request body response(s) to proxy",
		"modelName", st.labels.Model, "targetModelName", st.labels.Target)
	s.metrics.Running(st.labels, 1)
	st.running = true
	st.window.finish()
	return extproc.RequestReply{SetHeaders: set, Body: out, Destination: set[DestinationHeader]}, nil
}

// schedule is the director's HandleRequest from admission to PreRequest.
func (st *stream) schedule(req *fw.Request) (*fw.SchedulingResult, error) {
	s := st.s
	live := s.ds.List()
	if len(live) == 0 {
		return nil, fw.Error{Code: fw.CodeServiceUnavailable, Msg: "failed to find endpoint candidates for serving the request"}
	}
	cands := make([]*fw.Endpoint, len(live))
	for i, e := range live {
		cands[i] = fw.NewEndpoint(e.Meta, e.Metrics())
	}
	var perr []error
	for _, p := range s.producers {
		if err := p.Produce(st.ctx, req, cands); err != nil {
			perr = append(perr, err)
		}
	}
	if len(perr) > 0 {
		st.log.Error(sitePrepare, errors.Join(perr...), "failed to prepare per request data")
	}
	t := time.Now()
	res, err := s.sched.Schedule(st.ctx, req, cands)
	s.metrics.SchedulerE2E(time.Since(t))
	if err != nil {
		s.metrics.SchedulerAttempt(eppmetrics.StatusFailure, req.TargetModel, "", "", "")
		var e fw.Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, fw.Error{Code: fw.CodeResourceExhausted, Msg: fmt.Errorf("failed to find target endpoint: %w", err).Error()}
	}
	if m := res.ProfileResults[res.PrimaryProfileName].TargetEndpoints[0].Meta; m != nil {
		s.metrics.SchedulerAttempt(eppmetrics.StatusSuccess, req.TargetModel, m.PodName, m.Namespace, m.Port)
	}
	return res, nil
}

// ResponseHeaders implements extproc.Stream.
func (st *stream) ResponseHeaders(_ int, headers map[string]string) (map[string]string, error) {
	st.respHeaders = headers
	if strings.Contains(headers["content-type"], "text/event-stream") {
		st.streaming = true
	}
	return map[string]string{respHeaderMarker: "true"}, nil
}

// ResponseBody implements extproc.Stream.
func (st *stream) ResponseBody(chunk []byte, eos bool) ([]byte, error) {
	if st.streaming {
		if eos {
			st.complete, st.completeAt = true, time.Now()
		}
		st.handleBody(chunk, eos)
		if st.complete {
			st.log.V(zaplog.Default).Info(siteSentResp, "EPP sent response body back to proxy")
		}
		return chunk, nil
	}
	st.buf = append(st.buf, chunk...)
	if !eos {
		return nil, nil
	}
	st.complete, st.completeAt = true, time.Now()
	st.handleBody(st.buf, true)
	st.log.V(zaplog.Default).Info(siteSentResp, "EPP sent response body back to proxy")
	return st.buf, nil
}

// handleBody is HandleResponseBody: size, first-token time, inter-token
// latency, usage, and at end of stream the latency histograms.
func (st *stream) handleBody(b []byte, eos bool) {
	m := st.s.metrics
	st.respSize += len(b)
	now := time.Now()
	if st.first.IsZero() && len(b) > 0 {
		st.first = now
	}
	if st.streaming && len(b) > 0 {
		if !st.last.IsZero() {
			m.InterTokenLatency(st.labels, now.Sub(st.last).Seconds())
		}
		st.last = now
	}
	if u, ok := parseUsage(b, st.streaming); ok {
		st.usage = u
	}
	if eos {
		m.Complete(st.labels, eppmetrics.Completion{Received: st.received, FirstToken: st.first, Complete: st.completeAt,
			Streaming: st.streaming, ResponseSize: st.respSize, PromptTokens: st.usage.prompt, CompletionTokens: st.usage.completion})
	}
}

// Close implements extproc.Stream: the deferred bookkeeping of Process.
func (st *stream) Close() {
	if st.closed {
		return
	}
	st.closed = true
	st.s.active.Add(-1)
	if st.window != nil {
		st.window.finish()
	}
	st.s.metrics.RequestError(st.labels, st.errCode)
	if st.running {
		st.s.metrics.Running(st.labels, -1)
	}
}

func (s *server) resolves(path string) bool {
	for _, p := range s.parsers {
		for _, suffix := range p.Paths() {
			if matchSuffix(path, suffix) {
				return true
			}
		}
	}
	return false
}

// requestPath is GetRequestPath: :path without the query, default
// /v1/completions.
func requestPath(h map[string]string) string {
	for _, k := range []string{":path", "x-original-path", "x-forwarded-path"} {
		if p := h[k]; p != "" {
			if i := strings.IndexByte(p, '?'); i >= 0 {
				p = p[:i]
			}
			return p
		}
	}
	return "/v1/completions"
}

func matchSuffix(path, suffix string) bool {
	path = strings.TrimSuffix(strings.TrimSpace(path), "/")
	return strings.HasSuffix(path, strings.Trim(strings.TrimSpace(suffix), "/"))
}

func headerValue(h map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := h[k]; v != "" {
			return v
		}
	}
	return ""
}

// systemOwned are headers the EPP never echoes back as mutations.
func systemOwned(k string) bool {
	return strings.HasPrefix(k, ":") || k == "content-length" || k == DestinationHeader || k == "host"
}

// parseOpenAI is the openai-parser's ParseRequest for the chat-completions
// and completions APIs (the routed ones); other OpenAI paths are refused.
func parseOpenAI(path string, body []byte) (*fw.RequestBody, error) {
	payload := map[string]any{}
	if err := json.Unmarshal(body, &payload); err != nil {
		return nil, fmt.Errorf("error unmarshaling request bodyMap: %w", err)
	}
	out := &fw.RequestBody{Payload: payload}
	if m, ok := payload["model"].(string); ok {
		out.Model = m
	}
	if s, ok := payload["stream"].(bool); ok && s {
		out.Stream = true
	}
	switch {
	case matchSuffix(path, "chat/completions") || matchSuffix(path, "chat/completions/render"):
		msgs, ok := payload["messages"].([]any)
		if !ok || len(msgs) == 0 {
			return nil, errors.New("invalid chat completions request: must have valid messages field")
		}
		chat := &fw.ChatRequest{}
		if tools, ok := payload["tools"].([]any); ok {
			chat.Tools = tools
		}
		for _, raw := range msgs {
			m, _ := raw.(map[string]any)
			msg := fw.ChatMessage{}
			msg.Role, _ = m["role"].(string)
			switch c := m["content"].(type) {
			case string:
				msg.Raw = c
			case []any:
				for _, part := range c {
					pm, _ := part.(map[string]any)
					t, _ := pm["type"].(string)
					text, _ := pm["text"].(string)
					msg.Parts = append(msg.Parts, fw.ChatPart{Type: t, Text: text})
				}
			}
			chat.Messages = append(chat.Messages, msg)
		}
		out.Chat = chat
	case matchSuffix(path, "completions") || matchSuffix(path, "completions/render"):
		c := &fw.CompletionRequest{}
		switch p := payload["prompt"].(type) {
		case string:
			if p != "" {
				c.Strings = []string{p}
			}
		case []any:
			for _, x := range p {
				switch v := x.(type) {
				case string:
					c.Strings = append(c.Strings, v)
				case float64:
					c.TokenIDs = append(c.TokenIDs, uint32(v))
				}
			}
		}
		if len(c.Strings) == 0 && len(c.TokenIDs) == 0 {
			return nil, errors.New("invalid completions request: must have prompt field")
		}
		out.Completion = c
	default:
		return nil, errors.New("the sim routes the chat-completions and completions APIs only")
	}
	return out, nil
}

// parseUsage is extractUsage / extractUsageStreaming: the last "usage"
// object of a JSON body or of the SSE events in a chunk.
func parseUsage(b []byte, streaming bool) (usage, bool) {
	read := func(raw []byte) (usage, bool) {
		var doc struct {
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(raw, &doc) != nil || doc.Usage == nil {
			return usage{}, false
		}
		return usage{doc.Usage.PromptTokens, doc.Usage.CompletionTokens}, true
	}
	if !streaming {
		return read(b)
	}
	var out usage
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		data := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if data == "[DONE]" {
			continue
		}
		if u, ok := read([]byte(data)); ok {
			out, found = u, true
		}
	}
	return out, found
}

// traceparent is the W3C header the OTel propagator injects: the EPP's
// server span, sampled at the default parent-based 10 % ratio.
func traceparent() string {
	var b [25]byte
	_, _ = rand.Read(b[:])
	flags := "00"
	if b[24] < 26 {
		flags = "01"
	}
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:24]) + "-" + flags
}
