package vllm

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/sim/engine/internal/jsonw"
	"github.com/gpustack/routing-conformance/sim/engine/internal/openai"
	"github.com/gpustack/routing-conformance/sim/engine/internal/pyrepr"
	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
)

// usage is a response's token accounting.
type usage struct {
	prompt, completion, cached int
	details                    bool // --enable-prompt-tokens-details
}

// appendUsage writes {"prompt_tokens","total_tokens","completion_tokens"[,
// "prompt_tokens_details"]}. withNull writes the unset details as null, as
// model_dump of a full response does (prompt_tokens_details,
// completion_tokens_details); the final stream usage chunk is dumped with
// exclude_none and omits them.
func appendUsage(b []byte, u usage, withNull bool) []byte {
	b = openai.AppendUsageCounts(b, u.prompt, u.completion)
	switch {
	case u.details && u.cached > 0:
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = jsonw.Int(b, u.cached)
		b = append(b, '}')
	case withNull:
		b = append(b, `,"prompt_tokens_details":null`...)
	}
	if withNull {
		b = append(b, `,"completion_tokens_details":null`...)
	}
	return append(b, '}')
}

// choice is one of a response's choices: its text and how it ended
// (stopReason is JSON, see stopReason).
type choice struct {
	text, finish, stopReason string
}

// appendFinish writes a response choice's finish_reason and stop_reason.
func appendFinish(b []byte, c choice) []byte {
	b = append(b, `,"finish_reason":`...)
	b = jsonw.String(b, c.finish)
	b = append(b, `,"stop_reason":`...)
	return append(b, c.stopReason...)
}

// appendChatResponse is a non-streaming chat.completion (model_dump: nulls
// present), its choices indexed in order.
func appendChatResponse(b []byte, id string, created int64, model string, choices []choice, u usage) []byte {
	b = openai.AppendHead(b, id, "chat.completion", created, model)
	b = append(b, `,"choices":[`...)
	b = openai.AppendChoices(b, len(choices), func(b []byte, i int) []byte {
		c := choices[i]
		b = append(b, `,"message":{"role":"assistant","content":`...)
		b = jsonw.String(b, c.text)
		b = append(b, `,"refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning":null},"logprobs":null`...)
		b = appendFinish(b, c)
		return append(b, `,"token_ids":null,"routed_experts":null}`...)
	})
	b = append(b, `],"service_tier":null,"system_fingerprint":null,"usage":`...)
	b = appendUsage(b, u, true)
	return append(b, `,"prompt_logprobs":null,"prompt_token_ids":null,"prompt_text":null,"kv_transfer_params":null,"ec_transfer_params":null,"metrics":null}`...)
}

// appendCompletionResponse is a non-streaming text_completion.
func appendCompletionResponse(b []byte, id string, created int64, model string, choices []choice, u usage) []byte {
	b = openai.AppendHead(b, id, "text_completion", created, model)
	b = append(b, `,"choices":[`...)
	b = openai.AppendChoices(b, len(choices), func(b []byte, i int) []byte {
		c := choices[i]
		b = append(b, `,"text":`...)
		b = jsonw.String(b, c.text)
		b = append(b, `,"logprobs":null`...)
		b = appendFinish(b, c)
		return append(b, `,"token_ids":null,"prompt_logprobs":null,"prompt_token_ids":null,"routed_experts":null}`...)
	})
	b = append(b, `],"service_tier":null,"system_fingerprint":null,"usage":`...)
	b = appendUsage(b, u, true)
	return append(b, `,"kv_transfer_params":null,"ec_transfer_params":null,"metrics":null}`...)
}

// chunk is one SSE event of a stream; its JSON is built by the append*Chunk
// functions (exclude_unset: only fields the server set).
type chunkKind int

const (
	chunkRole chunkKind = iota
	chunkContent
	chunkFinal
)

// appendChatChunk writes a chat.completion.chunk with one choice, the
// index-th. continuous is the running usage for
// stream_options.continuous_usage_stats.
func appendChatChunk(b []byte, id string, created int64, model string, index int, kind chunkKind, text, finish, stopReason string, continuous *usage) []byte {
	b = openai.AppendHead(b, id, "chat.completion.chunk", created, model)
	b = append(b, `,"choices":[{"index":`...)
	b = jsonw.Int(b, index)
	b = append(b, `,"delta":{`...)
	switch kind {
	case chunkRole:
		b = append(b, `"role":"assistant","content":""`...)
	default:
		b = append(b, `"content":`...)
		b = jsonw.String(b, text)
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	switch kind {
	case chunkFinal:
		b = jsonw.String(b, finish)
		b = append(b, `,"stop_reason":`...)
		b = append(b, stopReason...)
		b = append(b, `,"token_ids":null`...)
	case chunkContent:
		b = append(b, `null,"token_ids":null`...)
	default:
		b = append(b, "null"...)
	}
	b = append(b, "}]"...)
	if continuous != nil {
		// Set explicitly, so kept by exclude_unset: completion_tokens_details
		// is null without a reasoning parser.
		b = append(b, `,"usage":`...)
		b = openai.AppendUsageCounts(b, continuous.prompt, continuous.completion)
		b = append(b, `,"completion_tokens_details":null}`...)
	}
	return append(b, '}')
}

// appendCompletionChunk writes a text_completion stream chunk, dumped with
// exclude_unset: every choice field is passed, usage only with continuous
// usage stats (completion/serving.py completion_stream_generator).
func appendCompletionChunk(b []byte, id string, created int64, model string, index int, text, finish, stopReason string, continuous *usage) []byte {
	b = openai.AppendHead(b, id, "text_completion", created, model)
	b = append(b, `,"choices":[{"index":`...)
	b = jsonw.Int(b, index)
	b = append(b, `,"text":`...)
	b = jsonw.String(b, text)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = jsonw.NullOrString(b, finish)
	b = append(b, `,"stop_reason":`...)
	if finish == "" {
		stopReason = "null"
	}
	b = append(b, stopReason...)
	b = append(b, `,"prompt_token_ids":null,"token_ids":null}]`...)
	if continuous != nil {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, *continuous, false)
	}
	return append(b, '}')
}

// stopReason is a choice's stop_reason as JSON: the stop string or stop
// token id that ended the output, null when the end-of-sequence token or the
// length limit did (vllm/v1/core/sched/utils.py check_stop,
// vllm/v1/engine/output_processor.py).
func stopReason(o openai.Output, finish string) string {
	switch {
	case finish != openai.FinishStop:
		return "null"
	case o.StopStr != "":
		return string(jsonw.String(nil, o.StopStr))
	case o.HasStopToken:
		return strconv.FormatUint(uint64(o.StopToken), 10)
	}
	return "null"
}

// appendUsageChunk is the final stream chunk with choices [] and usage.
func appendUsageChunk(b []byte, id, object string, created int64, model string, u usage) []byte {
	b = openai.AppendHead(b, id, object, created, model)
	b = append(b, `,"choices":[],"usage":`...)
	b = appendUsage(b, u, false)
	return append(b, '}')
}

// writeError writes vLLM's nested error body (since v0.10.1):
// {"error":{"message","type","param","code"}}.
func writeError(w http.ResponseWriter, status int, typ, msg, param string) {
	server.RespondJSON(w, status, func(b []byte) []byte {
		b = append(b, `{"error":{"message":`...)
		b = jsonw.String(b, msg)
		b = append(b, `,"type":`...)
		b = jsonw.String(b, typ)
		b = append(b, `,"param":`...)
		b = jsonw.NullOrString(b, param)
		b = append(b, `,"code":`...)
		b = jsonw.Int(b, status)
		return append(b, "}}"...)
	})
}

// validationMessage renders RequestValidationError the way vLLM's handler
// does: "<n> validation error(s):\n  {...}" with Python dict reprs.
func validationMessage(errs []openai.FieldError) (string, string) {
	var b strings.Builder
	label := "errors"
	if len(errs) == 1 {
		label = "error"
	}
	b.WriteString(strconv.Itoa(len(errs)))
	b.WriteString(" validation ")
	b.WriteString(label)
	b.WriteString(":")
	for _, e := range errs {
		b.WriteString("\n  {'type': ")
		b.WriteString(pyrepr.Str(e.Type))
		b.WriteString(", 'loc': ")
		b.WriteString(pyrepr.Str(strings.Join(e.Loc, ".")))
		b.WriteString(", 'msg': ")
		b.WriteString(pyrepr.Str(e.Msg))
		b.WriteString(", 'input': ")
		b.WriteString(pyrepr.Str(e.Input))
		if e.Ctx != "" {
			b.WriteString(", 'ctx': {'error': ")
			b.WriteString(pyrepr.Str(e.Ctx))
			b.WriteString("}")
		}
		b.WriteString("}")
	}
	param := ""
	if len(errs) > 0 {
		param = strings.Join(errs[0].Loc, ".")
	}
	return b.String(), param
}
