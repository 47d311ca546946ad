package sglang

import (
	"context"
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
	"github.com/gpustack/routing-conformance/sim/engine/internal/routes"
	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

// api is SGLang's HTTP server (http_server.py).
type api struct {
	cfg    *config
	eng    *engine
	m      *metrics
	stdout *server.Lines // uvicorn access log

	up     atomic.Bool   // ServerStatus.Up: warm-up done
	loaded chan struct{} // model loaded: generation may start
}

const maxBody = 64 << 20

// handlers serve the table's served routes, keyed by the route's path.
var handlers = map[string]func(a *api, w http.ResponseWriter, r *http.Request){
	"/health":          (*api).health,
	"/health_generate": (*api).health,
	"/metrics":         func(a *api, w http.ResponseWriter, r *http.Request) { promtext.Serve(w, a.m.reg, style) },
	"/v1/models":       func(a *api, w http.ResponseWriter, r *http.Request) { a.models(w) },
	"/v1/models/{model:path}": func(a *api, w http.ResponseWriter, r *http.Request) {
		a.model(w, strings.TrimPrefix(r.URL.Path, "/v1/models/"))
	},
	"/get_model_info":      (*api).modelInfo,
	"/model_info":          (*api).modelInfo,
	"/get_server_info":     func(a *api, w http.ResponseWriter, r *http.Request) { a.serverInfo(w) },
	"/server_info":         func(a *api, w http.ResponseWriter, r *http.Request) { a.serverInfo(w) },
	"/get_load":            func(a *api, w http.ResponseWriter, r *http.Request) { a.getLoad(w) },
	"/v1/loads":            (*api).loads,
	"/flush_cache":         (*api).flushCache,
	"/v1/chat/completions": func(a *api, w http.ResponseWriter, r *http.Request) { a.openAI(w, r, true) },
	"/v1/completions":      func(a *api, w http.ResponseWriter, r *http.Request) { a.openAI(w, r, false) },
	"/generate":            (*api).generate,
	"/": func(a *api, w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, http.StatusOK, []byte(`"SGLang is running"`))
	},
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &server.Recorder{ResponseWriter: w}
	a.serve(rec, r)
	if a.cfg.logHTTP == "info" || a.cfg.logHTTP == "debug" {
		a.stdout.Print("["+time.Now().Format("2006-01-02 15:04:05")+"] INFO:     ", server.AccessLine(r, rec.Code()))
	}
}

func (a *api) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	m := Routes.Find(r.Method, path)
	if m.Route != nil && m.Route.Mount && !a.cfg.metrics {
		m = routes.Match{} // add_prometheus_middleware mounts /metrics only with --enable-metrics
	}
	switch {
	// The --api-key middleware (utils/auth.py) runs before routing and
	// lets OPTIONS, /health* and /metrics* through.
	case a.cfg.apiKey != "" && r.Method != http.MethodOptions && !strings.HasPrefix(path, "/health") && !strings.HasPrefix(path, "/metrics") &&
		!bearer(r, a.cfg.apiKey):
		server.Unauthorized(w)
		return
	case m.Route == nil:
		server.NotFound(w)
		return
	case !m.MethodOK:
		server.MethodNotAllowed(w, m.Route.Allow())
		return
	case !m.Route.Served && !m.Route.Default():
		server.NotFound(w) // registered only under a condition a default launch lacks
		return
	case !m.Route.Served:
		writeError(w, http.StatusNotImplemented, "NotImplementedError", "The simulated SGLang does not emulate "+m.Route.Path+" (see docs/engines.md#sglang-routes).")
		return
	}
	handlers[m.Route.Path](a, w, r)
}

// bearer reports whether the request carries "Authorization: Bearer key"
// (the scheme in any case).
func bearer(r *http.Request, key string) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "bearer") && token == key
}

func (a *api) health(w http.ResponseWriter, r *http.Request) {
	if !a.up.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *api) modelInfo(w http.ResponseWriter, r *http.Request) {
	b := []byte(`{"model_path":`)
	b = jsonw.String(b, a.cfg.modelPath)
	b = append(b, `,"tokenizer_path":`...)
	b = jsonw.String(b, a.cfg.modelPath)
	b = append(b, `,"is_generation":true,"preferred_sampling_params":null,"weight_version":"default","has_image_understanding":false,"has_audio_understanding":false}`...)
	server.WriteJSON(w, http.StatusOK, b)
}

func (a *api) flushCache(w http.ResponseWriter, r *http.Request) {
	st := a.eng.sched.State()
	msg := "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"
	code := http.StatusOK
	if st.Running > 0 || st.Waiting > 0 {
		code = http.StatusBadRequest
	} else if a.eng.cache != nil {
		a.eng.cache.Reset()
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

func (a *api) appendCard(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonw.String(b, a.cfg.servedName)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"owned_by":"sglang","root":`...)
	b = jsonw.String(b, a.cfg.servedName)
	b = append(b, `,"parent":null,"max_model_len":`...)
	b = jsonw.Int(b, a.cfg.contextLen)
	return append(b, '}')
}

func (a *api) models(w http.ResponseWriter) {
	b := append([]byte(`{"object":"list","data":[`), nil...)
	b = a.appendCard(b)
	server.WriteJSON(w, http.StatusOK, append(b, "]}"...))
}

// model is GET /v1/models/{model}: the card, or a nested 404 (the one SGLang
// route that rejects an unknown model name).
func (a *api) model(w http.ResponseWriter, name string) {
	if name != a.cfg.servedName {
		b := []byte(`{"error":{"message":`)
		b = jsonw.String(b, fmt.Sprintf("The model '%s' does not exist", name))
		b = append(b, `,"type":"invalid_request_error","param":"model","code":"model_not_found"}}`...)
		server.WriteJSON(w, http.StatusNotFound, b)
		return
	}
	server.WriteJSON(w, http.StatusOK, a.appendCard(nil))
}

func (a *api) serverInfo(w http.ResponseWriter) {
	c := a.cfg
	info := map[string]any{
		"model_path": c.modelPath, "tokenizer_path": c.modelPath, "served_model_name": c.servedName,
		"host": c.host, "port": c.port, "context_length": c.contextLen, "mem_fraction_static": c.memFraction,
		"max_running_requests": c.maxRunning, "max_total_tokens": c.maxTotal, "page_size": c.pageSize,
		"disable_radix_cache": c.noRadix, "enable_cache_report": c.cacheReport, "enable_metrics": c.metrics,
		"tp_size": c.tp, "pp_size": c.pp, "dp_size": c.dp, "disaggregation_mode": c.disaggMode,
		"disaggregation_bootstrap_port": c.bootstrap, "dist_init_addr": nilIfEmpty(c.distInit),
		"schedule_policy": "fcfs", "chunked_prefill_size": 8192, "stream_interval": 1,
		"decode_log_interval": c.decodeLog, "skip_server_warmup": c.skipWarmup, "log_level": c.logLevel,
		"api_key": nilIfEmpty(c.apiKey), "stream_response_default_include_usage": c.includeUse,
		"max_total_num_tokens": c.maxTotal, "max_req_input_len": c.contextLen - 1,
		"internal_states": []map[string]any{{"last_gen_throughput": a.eng.lastThroughput(), "load": a.eng.sched.State().Running}},
		"version":         Version,
	}
	b, _ := json.Marshal(info)
	server.WriteJSON(w, http.StatusOK, b)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (e *engine) lastThroughput() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastThr
}

// getLoad is the deprecated GET /get_load of 0.5.18: a shim over
// get_loads(include=["core"]) projected to dp_rank, num_reqs,
// num_waiting_reqs, num_tokens (num_total_tokens: used KV plus what waiting
// requests hold; what sglang-gateway's power_of_two sums),
// num_pending_tokens and ts_tic (http_server.py).
func (a *api) getLoad(w http.ResponseWriter) {
	st := a.eng.sched.State()
	b := []byte(`[{"dp_rank":0,"num_reqs":`)
	b = jsonw.Int(b, st.Running+st.Waiting)
	b = append(b, `,"num_waiting_reqs":`...)
	b = jsonw.Int(b, st.Waiting)
	b = append(b, `,"num_tokens":`...)
	b = jsonw.Int(b, st.UsedKV+st.WaitingKV)
	// num_total_tokens - num_used_tokens: what the waiting requests need.
	b = append(b, `,"num_pending_tokens":`...)
	b = jsonw.Int(b, st.WaitingKV)
	// time.perf_counter(): seconds on a monotonic clock of arbitrary origin.
	b = append(b, `,"ts_tic":`...)
	b = jsonw.Float(b, time.Since(perfOrigin).Seconds())
	server.WriteJSON(w, http.StatusOK, append(b, "}]"...))
}

// perfOrigin stands for time.perf_counter()'s origin.
var perfOrigin = time.Now()

// loads is GET /v1/loads (sglang/srt/entrypoints/v1_loads.py).
func (a *api) loads(w http.ResponseWriter, r *http.Request) {
	include := r.URL.Query().Get("include")
	for _, s := range strings.Split(include, ",") {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains([]string{"core", "memory", "spec", "lora", "disagg", "queues", "all"}, s) {
			writeError(w, http.StatusBadRequest, "400", fmt.Sprintf("Invalid include sections: {'%s'}. Valid options: ['all', 'core', 'disagg', 'lora', 'memory', 'queues', 'spec']", s))
			return
		}
	}
	st := a.eng.sched.State()
	thr := a.eng.lastThroughput()
	usage := st.Usage()
	load := map[string]any{
		"dp_rank": 0, "num_running_reqs": st.Running, "num_waiting_reqs": st.Waiting,
		"num_used_tokens": st.UsedKV, "num_total_tokens": st.UsedKV + st.WaitingKV,
		"max_total_num_tokens": a.cfg.maxTotal, "token_usage": usage, "gen_throughput": thr,
		"cache_hit_rate": 0.0, "utilization": 0.0, "max_running_requests": a.cfg.maxRunning,
		"num_total_reqs": st.Running + st.Waiting,
	}
	if include == "" || strings.Contains(include, "all") || strings.Contains(include, "queues") {
		load["queues"] = map[string]int{"waiting": st.Waiting, "grammar": 0, "paused": 0, "retracted": 0}
	}
	out := map[string]any{
		"timestamp":     time.Now().UTC().Format("2006-01-02T15:04:05.000000+00:00"),
		"version":       Version,
		"dp_rank_count": 1,
		"loads":         []any{load},
		"aggregate": map[string]any{
			"total_running_reqs": st.Running, "total_waiting_reqs": st.Waiting, "total_reqs": st.Running + st.Waiting,
			"avg_token_usage": usage, "avg_throughput": thr, "avg_utilization": 0.0,
		},
	}
	b, _ := json.Marshal(out)
	server.WriteJSON(w, http.StatusOK, b)
}

// waitLoaded blocks a generation request until the model is loaded.
func (a *api) waitLoaded(ctx context.Context) error {
	select {
	case <-a.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openAI serves /v1/chat/completions and /v1/completions.
func (a *api) openAI(w http.ResponseWriter, r *http.Request, chat bool) {
	arrival := time.Now()
	pp := tokenize.GetIDs()
	defer tokenize.PutIDs(pp)
	req, err := openai.ReadRequest(r, chat, maxBody, *pp)
	if err == nil && req.MaxTokensNull { // CompletionRequest.max_tokens is a non-optional int
		err = &openai.ValidationError{Errors: []openai.FieldError{{Type: "int_type", Loc: []string{"body", "max_tokens"}, Msg: "Input should be a valid integer", Input: "None"}}}
	}
	if err != nil {
		a.badRequest(w, err)
		return
	}
	if chat && len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "BadRequestError", "Messages cannot be empty.")
		return
	}
	*pp = req.Prompt
	common, prompt := &req.Common, req.Prompt
	what := "input messages"
	maxTokens := common.MaxTokens
	if chat && maxTokens == 0 {
		// max_new_tokens is `max_completion_tokens or max_tokens`: a 0 is
		// falsy, so no limit.
		maxTokens = -1
	}
	if !chat {
		what = "prompt"
		maxTokens = 16 // CompletionRequest.max_tokens defaults to 16
		if common.MaxTokensField != "" {
			maxTokens = common.MaxTokens
		}
		if maxTokens <= 0 { // CompletionRequest.validate_max_tokens_positive
			a.badRequest(w, &openai.ValidationError{Errors: []openai.FieldError{{Type: "value_error", Loc: []string{"body", "max_tokens"}, Msg: "Value error, max_tokens must be positive", Input: strconv.Itoa(maxTokens), Ctx: "max_tokens must be positive"}}})
			return
		}
	}
	model := common.Model
	if model == "" {
		model = "default"
	}
	p := len(prompt)
	if p >= a.cfg.contextLen {
		writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", p, a.cfg.contextLen))
		return
	}
	if maxTokens >= 0 && p+maxTokens > a.cfg.contextLen {
		writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the %s and %d tokens for the completion. Please reduce the number of tokens in the %s or the completion to fit within the limit.", a.cfg.contextLen, p+maxTokens, p, what, maxTokens, what))
		return
	}
	if msg := verifySampling(common.Sampling, common.MinTokens, maxTokens, maxTokens >= 0 || (chat && common.MaxTokensField != "" && common.MaxTokens != 0), nil); msg != "" {
		writeError(w, http.StatusBadRequest, "BadRequestError", msg)
		return
	}
	out := openai.Plan(a.cfg.maxNewTokens(maxTokens, p), a.eng.knobs.OutputTokens, common.MinTokens, common.IgnoreEOS).Stop(openai.StopRules{
		Strings: common.Stop, TokenIDs: common.StopTokenIDs, Keep: common.NoStopTrim,
		MinTokens: common.MinTokens, ListOrder: true, IgnoreTokenIDs: common.IgnoreEOS,
	})
	if err := a.waitLoaded(r.Context()); err != nil {
		return
	}
	created := arrival.Unix()
	labels := r.Header.Get(a.cfg.customHdr)
	// n > 1 turns the request into a batch (GenerateReqInput's
	// _handle_parallel_sampling): the tokenizer manager first sends the
	// prompt alone with max_new_tokens 0 and waits for it, to cache the
	// common prefix, then n copies, each a request with its own rid
	// (_handle_batch_request). Every one of them is counted. n < 1 stays a
	// single request.
	seqs := []*seq{{prompt: prompt, out: out, stream: common.Stream, arrival: arrival, labels: labels, counted: true}}
	if common.N > 1 {
		pre := &seq{prompt: prompt, out: openai.Plan(0, 0, 0, false), arrival: arrival, labels: labels, counted: true}
		if _, err := a.eng.run(r.Context(), pre, nil); err != nil {
			if !server.ClientGone(r, err) {
				writeError(w, http.StatusInternalServerError, "InternalServerError", "Internal server error: "+err.Error())
			}
			return
		}
		for range common.N - 1 {
			seqs = append(seqs, &seq{prompt: prompt, out: out, stream: common.Stream, arrival: arrival, labels: labels, counted: true})
		}
	}
	ids := make([]string, len(seqs))
	for k := range ids {
		ids[k] = openai.NewID()
	}
	if common.Stream {
		// should_include_usage (entrypoints/openai/utils.py): the request's
		// include_usage or the server default; continuous_usage_stats on
		// its own.
		includeUsage, continuous := a.cfg.includeUse, false
		if so := common.StreamOptions; so != nil {
			includeUsage = includeUsage || (so.IncludeUsage != nil && *so.IncludeUsage)
			continuous = so.ContinuousUsageStats
		}
		a.stream(w, r, chat, seqs, ids, common.N, created, model, includeUsage, continuous)
		return
	}
	results, err := a.eng.runParallel(r.Context(), seqs, nil)
	if err != nil {
		if server.ClientGone(r, err) {
			return
		}
		writeError(w, http.StatusInternalServerError, "InternalServerError", "Internal server error: "+err.Error())
		return
	}
	// UsageProcessor.calculate_response_usage
	// (sgl-project/sglang@v0.5.18:python/sglang/srt/entrypoints/openai/usage_processor.py)
	// sums completion tokens over the choices and takes prompt and cached
	// tokens from every n-th response, range(0, len, n): the first choice's
	// once for n >= 1, none for a negative n, and a ValueError for n = 0
	// that handle_request answers 400 "BadRequest" (serving_base.py), after
	// the generation ran.
	if common.N == 0 {
		writeError(w, http.StatusBadRequest, "BadRequest", "range() arg 3 must not be zero")
		return
	}
	choices := make([]outChoice, len(results))
	u := usage{report: a.cfg.cacheReport}
	for k, res := range results {
		choices[k] = outChoice{text: out.Text(), finish: res.finish, matched: matchedStop(out, res.finish)}
		u.completion += res.generated
	}
	if common.N > 0 {
		u.prompt, u.cached = p, results[0].cached
	}
	server.RespondJSON(w, http.StatusOK, func(b []byte) []byte {
		// The response id is the first choice's rid.
		if chat {
			return appendChatResponse(b, ids[0], created, model, choices, u)
		}
		return appendCompletionResponse(b, ids[0], created, model, choices, u)
	})
}

// verifySampling is SamplingParams.verify of SGLang 0.5.18
// (python/sglang/srt/sampling/sampling_params.py), in its order, after
// __post_init__'s defaults (a temperature below 1e-6 means greedy, top_k 1;
// top_k -1 means the whole vocabulary). maxSet false is no limit (None). A failure
// is a ValueError the OpenAI handlers answer 400 BadRequestError and
// /generate 400 {"error":{"message"}}; "" means the parameters pass.
func verifySampling(s openai.Sampling, minNew, maxNew int, maxSet bool, intValued map[string]bool) string {
	// Python prints the value as it holds it: pydantic made the OpenAI
	// routes' values floats; /generate's dict keeps a JSON integer an int.
	py := func(name string, v float64) string {
		if intValued[name] && v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10)
		}
		return jsonw.PyRepr(v)
	}
	get := func(p *float64, def float64) float64 {
		if p != nil {
			return *p
		}
		return def
	}
	temp, topP, minP := get(s.Temperature, 1), get(s.TopP, 1), get(s.MinP, 0)
	freq, pres, rep := get(s.FrequencyPenalty, 0), get(s.PresencePenalty, 0), get(s.RepetitionPenalty, 1)
	topK := -1
	if s.TopK != nil {
		topK = *s.TopK
	}
	if 0 <= temp && temp < 1e-6 {
		temp, topK = 1, 1
	}
	if topK == -1 {
		topK = 1 << 30
	}
	switch {
	case temp < 0:
		return "temperature must be a non-negative finite number, got " + py("temperature", temp) + "."
	case !(0 < topP && topP <= 1):
		return "top_p must be in (0, 1], got " + py("top_p", topP) + "."
	case !(0 <= minP && minP <= 1):
		return "min_p must be in [0, 1], got " + py("min_p", minP) + "."
	case topK < 1:
		return fmt.Sprintf("top_k must be -1 (disable) or at least 1, got %d.", topK)
	case !(-2 <= freq && freq <= 2):
		return "frequency_penalty must be in [-2, 2], got " + py("frequency_penalty", freq) + "."
	case !(-2 <= pres && pres <= 2):
		return "presence_penalty must be in [-2, 2], got " + py("presence_penalty", pres) + "."
	case !(0 < rep && rep <= 2):
		return "repetition_penalty must be in (0, 2] (1.0 = no penalty), got " + py("repetition_penalty", rep) + "."
	case minNew < 0:
		return fmt.Sprintf("min_new_tokens must be in [0, max_new_tokens], got %d.", minNew)
	case maxSet && maxNew < 0:
		return fmt.Sprintf("max_new_tokens must be at least 0, got %d.", maxNew)
	case maxNew >= 0 && minNew > maxNew:
		return fmt.Sprintf("min_new_tokens must be in [0, max_new_tokens(%d)], got %d.", maxNew, minNew)
	}
	return ""
}

func (a *api) badRequest(w http.ResponseWriter, err error) {
	var ve *openai.ValidationError
	if errors.As(err, &ve) {
		writeError(w, http.StatusBadRequest, "Bad Request", validationMessage(ve.Errors))
		return
	}
	writeError(w, http.StatusBadRequest, "BadRequestError", err.Error())
}

// stream serves serving_chat's / serving_completions' SSE generators (0.5.18)
// over a request's sequences, one per choice, whose outputs arrive
// interleaved; each chunk carries the index and the rid (as id) of the
// sequence whose output it is. Chat sends a choice's role chunk with its
// first output, a chunk per non-empty text delta (never with a
// finish_reason), and, once every sequence is done, a finish chunk per
// choice in the order they finished (finish_reason, matched_stop), with the
// id of the last output received; completions send a chunk per output, the
// last of a choice with its finish_reason. Continuous usage stats put the
// choice's running usage on the text chunks; include_usage adds a usage
// chunk before [DONE], which sums completion tokens over the choices and
// takes the prompt once per n (calculate_streaming_usage: for n = 0 its
// idx % n raises ZeroDivisionError, which no handler catches, so the stream
// ends there, without usage or [DONE]).
func (a *api) stream(w http.ResponseWriter, r *http.Request, chat bool, seqs []*seq, ids []string, n int, created int64, model string, includeUsage, continuous bool) {
	ev := server.StartEvents(w)
	defer ev.Close()
	out := seqs[0].out
	ms := matchedStop(out, out.Finish)
	p := len(seqs[0].prompt)
	var mu sync.Mutex
	sent := make([]int, len(seqs))
	started := make([]bool, len(seqs))
	var finished []int // choice indexes in the order they finished
	lastID := ids[0]
	emit := func(k, upto int, res *result) error {
		mu.Lock()
		defer mu.Unlock()
		id := ids[k]
		lastID = id
		if upto == out.Tokens {
			finished = append(finished, k)
		}
		if chat && !started[k] {
			started[k] = true
			if err := ev.Send(func(b []byte) []byte {
				return appendChatChunk(b, id, created, model, k, "assistant", "", false, "", "", nil)
			}); err != nil {
				return err
			}
		}
		var text strings.Builder
		for i := sent[k]; i < upto; i++ {
			text.WriteString(out.TokenText(i))
		}
		sent[k] = upto
		var cu *usage
		if continuous {
			cu = &usage{prompt: p, completion: upto}
		}
		if chat {
			if text.Len() == 0 {
				return nil // an empty delta (the end-of-turn token) is not sent
			}
			return ev.Send(func(b []byte) []byte {
				return appendChatChunk(b, id, created, model, k, "", text.String(), false, "", "", cu)
			})
		}
		if text.Len() == 0 && upto < out.Tokens {
			return nil
		}
		finish := ""
		if upto == out.Tokens {
			finish = out.Finish
		}
		return ev.Send(func(b []byte) []byte {
			return appendCompletionChunk(b, id, created, model, k, text.String(), finish, ms, cu)
		})
	}
	results, err := a.eng.runParallel(r.Context(), seqs, emit)
	if err != nil {
		if !server.ClientGone(r, err) {
			_ = ev.Send(func(b []byte) []byte {
				b = append(b, `{"error":{"object":"error","message":`...)
				b = jsonw.String(b, err.Error())
				return append(b, `,"type":"InternalServerError","param":null,"code":500}}`...)
			})
			_ = ev.Done()
		}
		return
	}
	if chat {
		for _, k := range finished {
			res := results[k]
			_ = ev.Send(func(b []byte) []byte {
				return appendChatChunk(b, lastID, created, model, k, "", "", true, res.finish, matchedStop(out, res.finish), nil)
			})
		}
	}
	if includeUsage {
		if n == 0 {
			return // ZeroDivisionError in the generator: no usage, no [DONE]
		}
		object := "text_completion"
		if chat {
			object = "chat.completion.chunk"
		}
		u := usage{prompt: p, cached: results[0].cached, report: a.cfg.cacheReport}
		for _, res := range results {
			u.completion += res.generated
		}
		_ = ev.Send(func(b []byte) []byte { return appendUsageChunk(b, lastID, object, created, model, u, chat) })
	}
	_ = ev.Done()
}

// generateReq is GenerateReqInput's fields the sim acts on.
type generateReq struct {
	Text           *string  `json:"text"`
	InputIDs       []uint32 `json:"input_ids"`
	Stream         bool     `json:"stream"`
	Rid            string   `json:"rid"`
	LogMetrics     *bool    `json:"log_metrics"`
	SamplingParams struct {
		MaxNewTokens *int      `json:"max_new_tokens"`
		MinNewTokens int       `json:"min_new_tokens"`
		IgnoreEOS    bool      `json:"ignore_eos"`
		Stop         stopField `json:"stop"`
		Temperature  *float64  `json:"temperature"`
		TopP         *float64  `json:"top_p"`
		TopK         *int      `json:"top_k"`
		MinP         *float64  `json:"min_p"`
		Frequency    *float64  `json:"frequency_penalty"`
		Presence     *float64  `json:"presence_penalty"`
		Repetition   *float64  `json:"repetition_penalty"`
		StopTokenIDs []uint32  `json:"stop_token_ids"`
		NoStopTrim   bool      `json:"no_stop_trim"`
	} `json:"sampling_params"`
}

// stopField is SamplingParams.stop: a string or a list of strings.
type stopField []string

func (s *stopField) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopField{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

func (s stopField) list() []string { return s }

// generate is the native POST /generate.
func (a *api) generate(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	body, release, err := server.ReadBody(r, maxBody)
	if err != nil {
		a.generateError(w, err.Error())
		return
	}
	defer release()
	var req generateReq
	if err := json.Unmarshal(body, &req); err != nil {
		a.generateError(w, err.Error())
		return
	}
	var prompt []uint32
	switch {
	case req.Text != nil:
		prompt = tokenize.Encode(nil, *req.Text)
	case req.InputIDs != nil:
		prompt = req.InputIDs
	default:
		a.generateError(w, "Either text, input_ids or input_embeds should be provided.")
		return
	}
	if len(prompt) >= a.cfg.contextLen {
		a.generateError(w, fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", len(prompt), a.cfg.contextLen))
		return
	}
	maxNew := 128 // SamplingParams.max_new_tokens default
	if req.SamplingParams.MaxNewTokens != nil {
		maxNew = *req.SamplingParams.MaxNewTokens
	}
	sp := req.SamplingParams
	if msg := verifySampling(openai.Sampling{Temperature: sp.Temperature, TopP: sp.TopP, TopK: sp.TopK, MinP: sp.MinP, FrequencyPenalty: sp.Frequency, PresencePenalty: sp.Presence, RepetitionPenalty: sp.Repetition}, sp.MinNewTokens, maxNew, true, intLiterals(body)); msg != "" {
		a.generateError(w, msg)
		return
	}
	out := openai.Plan(a.cfg.maxNewTokens(maxNew, len(prompt)), a.eng.knobs.OutputTokens, req.SamplingParams.MinNewTokens, req.SamplingParams.IgnoreEOS).Stop(openai.StopRules{
		Strings: req.SamplingParams.Stop.list(), TokenIDs: req.SamplingParams.StopTokenIDs, Keep: req.SamplingParams.NoStopTrim,
		MinTokens: req.SamplingParams.MinNewTokens, ListOrder: true, IgnoreTokenIDs: req.SamplingParams.IgnoreEOS,
	})
	if err := a.waitLoaded(r.Context()); err != nil {
		return
	}
	rid := req.Rid
	if rid == "" {
		rid = openai.NewID()
	}
	s := &seq{prompt: prompt, out: out, stream: req.Stream, arrival: arrival, labels: r.Header.Get(a.cfg.customHdr), counted: req.LogMetrics == nil || *req.LogMetrics}
	meta := func(b []byte, res *result, upto int, final bool) []byte {
		b = append(b, `{"text":`...)
		var text strings.Builder
		for i := range upto {
			text.WriteString(out.TokenText(i))
		}
		b = jsonw.String(b, text.String())
		b = append(b, `,"output_ids":[`...)
		for i := range upto {
			if i > 0 {
				b = append(b, ',')
			}
			id := tokenize.TokenID(i)
			if out.IsEOS(i) {
				id = tokenize.IMEnd
			}
			b = strconv.AppendUint(b, uint64(id), 10)
		}
		b = append(b, `],"meta_info":{"id":`...)
		b = jsonw.String(b, rid)
		b = append(b, `,"finish_reason":`...)
		switch {
		case !final:
			b = append(b, "null"...)
		case res.finish == openai.FinishStop:
			b = append(b, `{"type":"stop","matched":`...)
			b = append(b, matchedStop(out, res.finish)...)
			b = append(b, '}')
		default:
			b = append(b, `{"type":"length","length":`...)
			b = jsonw.Int(b, out.Tokens)
			b = append(b, '}')
		}
		b = append(b, `,"prompt_tokens":`...)
		b = jsonw.Int(b, len(prompt))
		b = append(b, `,"weight_version":"default","completion_tokens":`...)
		b = jsonw.Int(b, upto)
		b = append(b, `,"cached_tokens":`...)
		b = jsonw.Int(b, res.cached)
		b = append(b, `,"e2e_latency":`...)
		b = jsonw.Float(b, time.Since(arrival).Seconds())
		return append(b, "}}"...)
	}
	if req.Stream {
		ev := server.StartEvents(w)
		defer ev.Close()
		_, err := a.eng.run(r.Context(), s, func(upto int, res *result) error {
			final := upto == out.Tokens
			if final {
				res.finish = out.Finish
			}
			return ev.Send(func(b []byte) []byte { return meta(b, res, upto, final) })
		})
		if err == nil {
			_ = ev.Done()
		}
		return
	}
	res, err := a.eng.run(r.Context(), s, nil)
	if err != nil {
		return
	}
	server.WriteJSON(w, http.StatusOK, meta(nil, &res, res.generated, true))
}

// intLiterals names the sampling_params numbers a /generate body wrote as
// JSON integers.
func intLiterals(body []byte) map[string]bool {
	var raw struct {
		SP map[string]json.RawMessage `json:"sampling_params"`
	}
	_ = json.Unmarshal(body, &raw)
	out := map[string]bool{}
	for k, v := range raw.SP {
		if t := strings.TrimSpace(string(v)); t != "" && !strings.ContainsAny(t, ".eE\"[]{}ntf") {
			out[k] = true
		}
	}
	return out
}

func (a *api) generateError(w http.ResponseWriter, msg string) {
	b := []byte(`{"error":{"message":`)
	b = jsonw.String(b, msg)
	server.WriteJSON(w, http.StatusBadRequest, append(b, "}}"...))
}
