package vllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustack/routing-conformance/sim/engine/internal/jsonw"
	"github.com/gpustack/routing-conformance/sim/engine/internal/openai"
	"github.com/gpustack/routing-conformance/sim/engine/internal/promtext"
	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

// api is the OpenAI-compatible HTTP server in front of the engine.
type api struct {
	cfg       *config
	eng       *engine
	m         *metrics
	stdout    *server.Lines
	load      atomic.Int64 // in-flight requests (--enable-server-load-tracking)
	accessLog bool         // uvicorn's access log (not --disable-uvicorn-access-log)
}

// maxBody is the largest request body read (vLLM has no small limit; this
// only protects the sim).
const maxBody = 64 << 20

// Routes excluded from the HTTP instrumentator's metrics.
var excluded = map[string]bool{"/metrics": true, "/health": true, "/load": true, "/ping": true, "/version": true, "/server_info": true}

// Render routes.
const (
	renderChatPath       = "/v1/chat/completions/render"
	renderCompletionPath = "/v1/completions/render"
)

// handlers serve the table's served routes, keyed by the route's path.
var handlers = map[string]func(a *api, w http.ResponseWriter, r *http.Request){
	"/health":  func(a *api, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) },
	"/ping":    func(a *api, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) },
	"/metrics": func(a *api, w http.ResponseWriter, r *http.Request) { promtext.Serve(w, a.m.reg, a.m.style) },
	"/version": func(a *api, w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, http.StatusOK, []byte(`{"version":"`+Version+`"}`))
	},
	"/load":                func(a *api, w http.ResponseWriter, r *http.Request) { a.serverLoad(w) },
	"/v1/models":           func(a *api, w http.ResponseWriter, r *http.Request) { a.models(w) },
	"/tokenize":            func(a *api, w http.ResponseWriter, r *http.Request) { a.tokenizeHandler(w, r) },
	renderChatPath:         func(a *api, w http.ResponseWriter, r *http.Request) { a.render(w, r, true) },
	renderCompletionPath:   func(a *api, w http.ResponseWriter, r *http.Request) { a.render(w, r, false) },
	"/v1/chat/completions": func(a *api, w http.ResponseWriter, r *http.Request) { a.tracked(w, r, true) },
	"/v1/completions":      func(a *api, w http.ResponseWriter, r *http.Request) { a.tracked(w, r, false) },
}

// routeOrder is the start-up log's route listing: the served routes with
// methods, in the table's order.
func routeOrder() [][2]string {
	var out [][2]string
	for _, r := range Routes.Routes {
		if r.Served && !r.Mount {
			out = append(out, [2]string{r.Path, strings.Join(r.Methods, ", ")})
		}
	}
	return out
}

// guarded are the path prefixes --api-key guards
// (serve/middleware/authenticate.py GUARDED_PREFIX).
var guarded = []string{"/v1", "/v2", "/inference", "/cohere"}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &server.Recorder{ResponseWriter: w}
	path := r.URL.Path
	m := Routes.Find(r.Method, path)
	handler := "none"
	if m.Route != nil {
		handler = m.Route.Path
	}
	switch {
	// The authentication middleware runs before routing: a guarded path
	// without the key is 401 whether or not a route serves it.
	case len(a.cfg.apiKeys) > 0 && r.Method != http.MethodOptions && hasGuardedPrefix(path) && !a.authorized(r):
		server.Unauthorized(rec)
	case m.Route == nil:
		server.NotFound(rec)
	case !m.MethodOK:
		server.MethodNotAllowed(rec, m.Route.Allow())
	case !m.Route.Served && !m.Route.Default():
		server.NotFound(rec) // registered only under a condition a default launch lacks
	case !m.Route.Served:
		writeError(rec, http.StatusNotImplemented, "NotImplementedError", "The simulated vLLM does not emulate "+m.Route.Path+" (see docs/engines.md#vllm-routes).", "")
	default:
		if a.cfg.requestIDHeaders {
			id := r.Header.Get("X-Request-Id")
			if id == "" {
				id = openai.NewID()
			}
			rec.Header().Set("X-Request-Id", id)
		}
		handlers[m.Route.Path](a, rec, r)
	}
	status := rec.Code()
	if !excluded[handler] {
		a.m.httpTotal.WithLabelValues(r.Method, statusGroup(status), handler).Inc()
		a.m.httpInSize.WithLabelValues(handler).Observe(float64(max(r.ContentLength, 0)))
		a.m.httpOutSize.WithLabelValues(handler).Observe(float64(rec.Bytes))
		el := time.Since(start).Seconds()
		a.m.httpHighr.Observe(el)
		a.m.httpLowr.WithLabelValues(r.Method, handler).Observe(el)
	}
	if a.accessLog {
		a.stdout.Print(apiPrefix+"INFO:     ", server.AccessLine(r, status))
	}
}

func hasGuardedPrefix(path string) bool {
	for _, p := range guarded {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

func statusGroup(code int) string { return strconv.Itoa(code/100) + "xx" }

func (a *api) authorized(r *http.Request) bool {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return false
	}
	return slices.Contains(a.cfg.apiKeys, token)
}

// tracked is a generation route, counted in /load's server_load with
// --enable-server-load-tracking.
func (a *api) tracked(w http.ResponseWriter, r *http.Request, chat bool) {
	if a.cfg.serverLoadTracking {
		a.load.Add(1)
		defer a.load.Add(-1)
	}
	a.generate(w, r, chat)
}

func (a *api) serverLoad(w http.ResponseWriter) {
	server.WriteJSON(w, http.StatusOK, []byte(`{"server_load":`+strconv.FormatInt(a.load.Load(), 10)+`}`))
}

func (a *api) models(w http.ResponseWriter) {
	now := time.Now().Unix()
	b := []byte(`{"object":"list","data":[`)
	for i, name := range a.cfg.servedNames {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = jsonw.String(b, name)
		b = append(b, `,"object":"model","created":`...)
		b = strconv.AppendInt(b, now, 10)
		b = append(b, `,"owned_by":"vllm","root":`...)
		b = jsonw.String(b, a.cfg.model)
		b = append(b, `,"parent":null,"max_model_len":`...)
		b = jsonw.Int(b, a.cfg.maxModelLen)
		b = append(b, `,"permission":[{"id":"modelperm-`...)
		b = append(b, openai.NewID()...)
		b = append(b, `","object":"model_permission","created":`...)
		b = strconv.AppendInt(b, now, 10)
		b = append(b, `,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}`...)
	}
	b = append(b, "]}"...)
	server.WriteJSON(w, http.StatusOK, b)
}

// tokenizeHandler is POST /tokenize: {"prompt"} or {"messages"} to token ids.
func (a *api) tokenizeHandler(w http.ResponseWriter, r *http.Request) {
	body, release, err := server.ReadBody(r, maxBody)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", err.Error(), "")
		return
	}
	defer release()
	// TokenizeRequest is a union: chat messages, else a completion prompt.
	req, err := openai.Decode(body, true, nil)
	if err != nil {
		req, err = openai.Decode(body, false, nil)
	}
	if err != nil {
		a.badRequest(w, err)
		return
	}
	// create_tokenize checks the model first (serve/tokenize/serving.py).
	if _, ok := a.servedModel(w, req.Model); !ok {
		return
	}
	ids := req.Prompt
	b := []byte(`{"count":`)
	b = jsonw.Int(b, len(ids))
	b = append(b, `,"max_model_len":`...)
	b = jsonw.Int(b, a.cfg.maxModelLen)
	b = append(b, `,"tokens":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	b = append(b, `],"token_strs":null}`...)
	server.WriteJSON(w, http.StatusOK, b)
}

// generate serves /v1/chat/completions (chat) and /v1/completions.
func (a *api) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	arrival := time.Now()
	pp := tokenize.GetIDs()
	defer tokenize.PutIDs(pp)
	req, err := openai.ReadRequest(r, chat, maxBody, *pp)
	if err != nil {
		a.badRequest(w, err)
		return
	}
	*pp = req.Prompt
	common, prompt := &req.Common, req.Prompt
	kvParams, err := kvTransferParams(common.KVTransferParams)
	if err != nil {
		a.badRequest(w, err)
		return
	}
	if common.StreamOptions != nil && !common.Stream {
		msg, _ := validationMessage([]openai.FieldError{{Type: "value_error", Loc: []string{"body"}, Msg: "Value error, Stream options can only be defined when `stream=True`.", Input: "<dict>", Ctx: "Stream options can only be defined when `stream=True`."}})
		writeError(w, http.StatusBadRequest, "Bad Request", msg, "body")
		return
	}
	model, ok := a.servedModel(w, common.Model)
	if !ok {
		return
	}
	if !chat && common.MaxTokensField == "" {
		// CompletionRequest.max_tokens defaults to 16, null included
		// (normalize_null_max_tokens).
		common.MaxTokens, common.MaxTokensField = 16, "max_tokens"
	}
	p := len(prompt)
	if msg, param, bad := a.checkLength(common, p, req.TokenPrompt); bad {
		writeError(w, http.StatusBadRequest, "BadRequestError", msg, param)
		return
	}
	// get_max_tokens: what the context window leaves, or less if the request
	// asks for less. Without max_tokens, ignore_eos runs to it and ends in
	// "length".
	limit := a.cfg.maxModelLen - p
	if common.MaxTokensField != "" {
		limit = min(limit, common.MaxTokens)
	}
	if msg, param, bad := checkSampling(common, limit, a.cfg.maxNSequences); bad {
		writeError(w, http.StatusBadRequest, "BadRequestError", msg, param)
		return
	}
	out := openai.Plan(limit, a.eng.knobs.OutputTokens, common.MinTokens, common.IgnoreEOS).Stop(openai.StopRules{
		Strings: common.Stop, TokenIDs: common.StopTokenIDs, Keep: common.IncludeStopStr,
		MinTokens: common.MinTokens, TokensFirst: true,
	})

	base := r.Header.Get("X-Request-Id")
	if base == "" {
		base = common.RequestID
	}
	if base == "" {
		base = openai.NewID()
	}
	id := "cmpl-" + base
	if chat {
		id = "chatcmpl-" + base
	}
	// A decode engine pulls the prompt's KV when the request asks for a
	// remote prefill; otherwise it prefills locally, as without a connector.
	remote := false
	if mooncakeConsumer(a.cfg.kvTransferConfig) {
		wants, complete := remotePrefill(kvParams)
		remote = wants && complete
	}
	// One engine sequence per choice (n > 1 fans out into children).
	seqs := make([]*seq, common.N)
	for k := range seqs {
		seqs[k] = &seq{prompt: prompt, salt: common.CacheSalt, skipCache: common.PromptLogprobs, out: out, maxTokens: limit, arrival: arrival, remote: remote}
	}
	created := arrival.Unix()
	if common.Stream {
		a.stream(w, r, chat, seqs, id, created, model, common)
		return
	}
	results, err := a.eng.runN(r.Context(), seqs, nil)
	if err != nil {
		if server.ClientGone(r, err) {
			return
		}
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error(), "")
		return
	}
	a.eng.finishParent(len(seqs), results)
	// The response's usage counts the prompt once and every choice's tokens
	// (chat_completion_full_generator, completion_full_generator); its
	// num_cached_tokens is that of the RequestOutput the last child to finish
	// completed, the last of children finishing together.
	choices := make([]choice, len(results))
	completion := 0
	for k, res := range results {
		choices[k] = choice{text: out.Text(), finish: res.finish, stopReason: stopReason(out, res.finish)}
		completion += res.generated
	}
	last := results[len(results)-1]
	u := usage{prompt: p, completion: completion, cached: last.cached + last.external, details: a.cfg.promptTokensDetail}
	if f := r.Header.Get("endpoint-load-metrics-format"); f != "" {
		if v := a.orcaHeader(f); v != "" {
			w.Header().Set("endpoint-load-metrics", v)
		}
	}
	server.RespondJSON(w, http.StatusOK, func(b []byte) []byte {
		if chat {
			return appendChatResponse(b, id, created, model, choices, u)
		}
		return appendCompletionResponse(b, id, created, model, choices, u)
	})
}

// kvTransferParams validates kv_transfer_params as the request models
// declare it, dict[str, Any] | None (vllm-project/vllm@98dff2a81:vllm/entrypoints/openai/chat_completion/protocol.py,
// completion/protocol.py): anything but an object or null is a
// validation error. An empty object, like null, passes no params
// (to_sampling_params copies them only when truthy).
func kvTransferParams(raw []byte) (map[string]json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, &openai.ValidationError{Errors: []openai.FieldError{{Type: "dict_type", Loc: []string{"body", "kv_transfer_params"}, Msg: "Input should be a valid dictionary", Input: string(raw)}}}
	}
	return m, nil
}

// checkLength is the renderer's TokenizeParams checks (vLLM 0.29.0
// vllm/renderers/params.py): the requested output alone may not exceed
// max_model_len, and the prompt may not exceed what the output leaves. A
// prompt the server tokenizes is cut at max_input_tokens+1 tokens first, so
// its count is reported as "at least" that.
func (a *api) checkLength(c *openai.Common, p int, tokenPrompt bool) (msg, param string, bad bool) {
	total := a.cfg.maxModelLen
	out, field := 0, "max_tokens"
	if c.MaxTokensField != "" {
		out, field = c.MaxTokens, c.MaxTokensField
	}
	if out > total {
		return fmt.Sprintf("%s=%d cannot be greater than max_model_len=max_total_tokens=%d. Please request fewer output tokens. (parameter=%s, value=%d)", field, out, total, field, out), field, true
	}
	maxInput := total - out
	if p <= maxInput {
		return "", "", false
	}
	count, qualifier := p, ""
	if !tokenPrompt {
		count = min(p, maxInput+1)
	}
	if count == maxInput+1 {
		qualifier = "at least "
	}
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d output tokens and your prompt contains %s%d input tokens, for a total of %s%d tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=%d)",
		total, out, qualifier, count, qualifier, count+out, count), "input_tokens", true
}

// checkSampling is SamplingParams._verify_args of vLLM 0.29.0
// (vllm/sampling_params.py), in its order, for the parameters the sim reads;
// maxTokens is the limit get_max_tokens computed. Errors that carry a
// parameter print it and the value after the message (VLLMValidationError's
// str) and set the body's param.
//
// n is checked by _verify_num_sequences: at least 1 and at most maxN
// (VLLM_MAX_N_SEQUENCES, 16384 by default, vllm/envs.py); after the other
// checks, a greedy request (temperature below _SAMPLING_EPS, 1e-5) may not
// ask for n > 1 (_verify_greedy_sampling). An absent temperature is 1.0.
func checkSampling(c *openai.Common, maxTokens, maxN int) (msg, param string, bad bool) {
	s := c.Sampling
	py := jsonw.PyRepr
	with := func(m, name, value string) (string, string, bool) {
		return m + " (parameter=" + name + ", value=" + value + ")", name, true
	}
	switch {
	case c.N < 1:
		return fmt.Sprintf("n must be at least 1, got %d.", c.N), "", true
	case c.N > maxN:
		return fmt.Sprintf("n must be at most %d, got %d. To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable.", maxN, c.N), "", true
	case s.PresencePenalty != nil && !(-2 <= *s.PresencePenalty && *s.PresencePenalty <= 2):
		return "presence_penalty must be in [-2, 2], got " + py(*s.PresencePenalty) + ".", "", true
	case s.FrequencyPenalty != nil && !(-2 <= *s.FrequencyPenalty && *s.FrequencyPenalty <= 2):
		return "frequency_penalty must be in [-2, 2], got " + py(*s.FrequencyPenalty) + ".", "", true
	case s.RepetitionPenalty != nil && *s.RepetitionPenalty <= 0:
		return "repetition_penalty must be greater than zero, got " + py(*s.RepetitionPenalty) + ".", "", true
	case s.Temperature != nil && *s.Temperature < 0:
		return with("temperature must be non-negative, got "+py(*s.Temperature)+".", "temperature", py(*s.Temperature))
	case s.Temperature != nil && *s.Temperature > 2:
		return with("temperature must be in [0, 2], got "+py(*s.Temperature)+".", "temperature", py(*s.Temperature))
	case s.TopP != nil && !(0 < *s.TopP && *s.TopP <= 1):
		return with("top_p must be in (0, 1], got "+py(*s.TopP)+".", "top_p", py(*s.TopP))
	case s.TopK != nil && *s.TopK < -1:
		return fmt.Sprintf("top_k must be 0 (disable), or at least 1, got %d.", *s.TopK), "", true
	case s.MinP != nil && !(0 <= *s.MinP && *s.MinP <= 1):
		return "min_p must be in [0, 1], got " + py(*s.MinP) + ".", "", true
	case maxTokens < 1:
		return with(fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTokens), "max_tokens", strconv.Itoa(maxTokens))
	case c.MinTokens < 0:
		return fmt.Sprintf("min_tokens must be greater than or equal to 0, got %d.", c.MinTokens), "", true
	case c.MinTokens > maxTokens:
		return fmt.Sprintf("min_tokens must be less than or equal to max_tokens=%d, got %d.", maxTokens, c.MinTokens), "", true
	case s.Temperature != nil && *s.Temperature < 1e-5 && c.N > 1:
		return fmt.Sprintf("n must be 1 when using greedy sampling, got %d.", c.N), "", true
	}
	return "", "", false
}

func (a *api) badRequest(w http.ResponseWriter, err error) {
	var ve *openai.ValidationError
	if errors.As(err, &ve) {
		msg, param := validationMessage(ve.Errors)
		writeError(w, http.StatusBadRequest, "Bad Request", msg, param)
		return
	}
	writeError(w, http.StatusBadRequest, "BadRequestError", err.Error(), "")
}

// orcaHeader is the endpoint-load-metrics response header (TEXT or JSON).
func (a *api) orcaHeader(format string) string {
	st := a.eng.sched.State()
	kv := jsonw.PyRepr(st.Usage())
	waiting := jsonw.PyRepr(float64(st.Waiting))
	switch strings.ToUpper(strings.TrimSpace(format)) {
	case "TEXT":
		return "TEXT named_metrics.kv_cache_usage_perc=" + kv + ", named_metrics.num_requests_waiting=" + waiting
	case "JSON":
		return `JSON {"named_metrics": {"kv_cache_usage_perc": ` + kv + `, "num_requests_waiting": ` + waiting + `}}`
	}
	return ""
}

// stream serves an SSE response: for each choice a role chunk (chat),
// content chunks paced by ITL and a final chunk with finish_reason; then the
// usage chunk when asked for, and [DONE]. With n > 1 the role chunks of
// every choice go out together before the first content, and each chunk
// carries one choice, its index that of the child sequence that produced it
// (chat_completion_stream_generator, completion_stream_generator).
func (a *api) stream(w http.ResponseWriter, r *http.Request, chat bool, seqs []*seq, id string, created int64, model string, common *openai.Common) {
	// should_include_usage (serve/utils/api_utils.py): StreamOptions'
	// include_usage and continuous_usage_stats default to false;
	// --enable-force-include-usage turns both on.
	includeUsage, continuous := a.cfg.forceIncludeUsage, a.cfg.forceIncludeUsage
	if so := common.StreamOptions; so != nil && !includeUsage {
		includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
		continuous = includeUsage && so.ContinuousUsageStats
	}
	ev := server.StartEvents(w)
	defer ev.Close()
	out := seqs[0].out
	p := len(seqs[0].prompt)
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	sr := stopReason(out, out.Finish)
	var mu sync.Mutex // the children emit concurrently
	first := true
	firstCached := 0 // num_cached_tokens of the first output's RequestOutput
	emit := func(k, i int, res *result) error {
		mu.Lock()
		defer mu.Unlock()
		var cu *usage
		if continuous {
			cu = &usage{prompt: p, completion: i + 1}
		}
		last := i == out.Tokens-1
		finish := ""
		if last {
			finish = out.Finish
		}
		text := out.TokenText(i)
		if first {
			first, firstCached = false, res.cached+res.external
			for c := range seqs {
				if !chat {
					break
				}
				if err := ev.Send(func(b []byte) []byte {
					var ru *usage
					if continuous {
						ru = &usage{prompt: p}
					}
					return appendChatChunk(b, id, created, model, c, chunkRole, "", "", "", ru)
				}); err != nil {
					return err
				}
			}
		}
		if chat {
			kind := chunkContent
			if last {
				kind = chunkFinal
			}
			return ev.Send(func(b []byte) []byte { return appendChatChunk(b, id, created, model, k, kind, text, finish, sr, cu) })
		}
		return ev.Send(func(b []byte) []byte { return appendCompletionChunk(b, id, created, model, k, text, finish, sr, cu) })
	}
	results, err := a.eng.runN(r.Context(), seqs, emit)
	if err != nil {
		if !server.ClientGone(r, err) {
			_ = ev.Send(func(b []byte) []byte {
				b = append(b, `{"error":{"message":`...)
				b = jsonw.String(b, err.Error())
				return append(b, `,"type":"InternalServerError","param":null,"code":500}}`...)
			})
			_ = ev.Done()
		}
		return
	}
	a.eng.finishParent(len(seqs), results)
	if includeUsage {
		completion := 0
		for _, res := range results {
			completion += res.generated
		}
		u := usage{prompt: p, completion: completion, cached: firstCached, details: a.cfg.promptTokensDetail}
		_ = ev.Send(func(b []byte) []byte { return appendUsageChunk(b, id, object, created, model, u) })
	}
	_ = ev.Done()
}

// render is POST /v1/chat/completions/render and /v1/completions/render:
// the GenerateRequest the prompt becomes, its token_ids being what the
// engine would prefill (vllm/entrypoints/serve/render/api_router.py and
// serve/disagg/protocol.py GenerateRequest). The completions route answers a
// list, one entry per prompt. sampling_params carries max_tokens only.
func (a *api) render(w http.ResponseWriter, r *http.Request, chat bool) {
	pp := tokenize.GetIDs()
	defer tokenize.PutIDs(pp)
	req, err := openai.ReadRequest(r, chat, maxBody, *pp)
	if err != nil {
		a.badRequest(w, err)
		return
	}
	*pp = req.Prompt
	model, ok := a.servedModel(w, req.Model)
	if !ok {
		return
	}
	maxTokens := req.MaxTokens
	if maxTokens < 0 {
		maxTokens = a.cfg.maxModelLen - len(req.Prompt)
	}
	b := []byte{}
	if !chat {
		b = append(b, '[')
	}
	b = append(b, `{"request_id":`...)
	b = jsonw.String(b, openai.NewID())
	b = append(b, `,"token_ids":[`...)
	for i, id := range req.Prompt {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	b = append(b, `],"features":null,"sampling_params":{"max_tokens":`...)
	b = jsonw.Int(b, maxTokens)
	b = append(b, `},"model":`...)
	b = jsonw.String(b, model)
	b = append(b, `,"stream":false,"stream_options":null,"cache_salt":`...)
	if req.CacheSalt != "" {
		b = jsonw.String(b, req.CacheSalt)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"priority":0,"kv_transfer_params":null}`...)
	if !chat {
		b = append(b, ']')
	}
	server.WriteJSON(w, http.StatusOK, b)
}

// servedModel is the model a request names, or the first served name when
// it names none; a name not served is answered 404 and ok is false.
func (a *api) servedModel(w http.ResponseWriter, name string) (string, bool) {
	if name == "" {
		return a.cfg.servedName(), true
	}
	if !slices.Contains(a.cfg.servedNames, name) {
		// OpenAIServing._check_model (serve/engine/serving.py) sets param.
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", name), "model")
		return "", false
	}
	return name, true
}
