package sglang

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/sim/engine/internal/jsonw"
	"github.com/gpustack/routing-conformance/sim/engine/internal/openai"
	"github.com/gpustack/routing-conformance/sim/engine/internal/pyrepr"
	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

type usage struct {
	prompt, completion, cached int
	report                     bool // --enable-cache-report
}

// appendUsage is UsageInfo (0.5.18: prompt_tokens, total_tokens,
// completion_tokens, prompt_tokens_details, reasoning_tokens); withNull
// writes an absent prompt_tokens_details as null (model_dump), otherwise it
// is left out (exclude_none).
func appendUsage(b []byte, u usage, withNull bool) []byte {
	b = openai.AppendUsageCounts(b, u.prompt, u.completion)
	switch {
	case u.report && u.cached > 0:
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = jsonw.Int(b, u.cached)
		b = append(b, '}')
	case withNull:
		b = append(b, `,"prompt_tokens_details":null`...)
	}
	return append(b, `,"reasoning_tokens":0}`...)
}

// matchedStop is a choice's matched_stop as JSON: the "matched" of the
// request's finish reason, which is the stop string (FINISH_MATCHED_STR) or
// the token id (FINISH_MATCHED_TOKEN: a stop_token_ids entry or the
// end-of-turn token) that ended it; null on length or while unfinished
// (python/sglang/srt/managers/schedule_batch.py, serving_chat.py).
func matchedStop(o openai.Output, finish string) string {
	switch {
	case finish != openai.FinishStop:
		return "null"
	case o.StopStr != "":
		return string(jsonw.String(nil, o.StopStr))
	case o.HasStopToken:
		return strconv.FormatUint(uint64(o.StopToken), 10)
	}
	return strconv.FormatUint(uint64(tokenize.IMEnd), 10)
}

// outChoice is one of a response's choices (matched is JSON, see matchedStop).
type outChoice struct {
	text, finish, matched string
}

func appendChatResponse(b []byte, id string, created int64, model string, choices []outChoice, u usage) []byte {
	b = openai.AppendHead(b, id, "chat.completion", created, model)
	b = append(b, `,"choices":[`...)
	b = openai.AppendChoices(b, len(choices), func(b []byte, i int) []byte {
		c := choices[i]
		b = append(b, `,"message":{"role":"assistant","content":`...)
		b = jsonw.String(b, c.text)
		b = append(b, `,"reasoning_content":null,"tool_calls":null},"logprobs":null`...)
		return appendChoiceEnd(b, c)
	})
	return appendResponseEnd(b, u)
}

func appendCompletionResponse(b []byte, id string, created int64, model string, choices []outChoice, u usage) []byte {
	b = openai.AppendHead(b, id, "text_completion", created, model)
	b = append(b, `,"choices":[`...)
	b = openai.AppendChoices(b, len(choices), func(b []byte, i int) []byte {
		c := choices[i]
		b = append(b, `,"text":`...)
		b = jsonw.String(b, c.text)
		b = append(b, `,"logprobs":null`...)
		return appendChoiceEnd(b, c)
	})
	return appendResponseEnd(b, u)
}

// appendChoiceEnd closes a response's choice (finish_reason, matched_stop;
// the choice serializers drop hidden_states and the token-id fields when
// None).
func appendChoiceEnd(b []byte, c outChoice) []byte {
	b = append(b, `,"finish_reason":`...)
	b = jsonw.String(b, c.finish)
	b = append(b, `,"matched_stop":`...)
	b = append(b, c.matched...)
	return append(b, '}')
}

// appendResponseEnd closes the choices and adds usage and metadata (sglext
// dropped when None).
func appendResponseEnd(b []byte, u usage) []byte {
	b = append(b, `],"usage":`...)
	b = appendUsage(b, u, true)
	return append(b, `,"metadata":{"weight_version":"default"}}`...)
}

// appendChatChunk writes a chat.completion.chunk as sse_utils.build_sse_content
// encodes it with msgspec: the delta always has reasoning_content (null)
// first, then role and content only when set; the choice always has
// logprobs, finish_reason and matched_stop; the chunk has usage only when
// set (continuous usage stats). role != "" makes the role chunk; final
// makes the finish chunk (no content).
func appendChatChunk(b []byte, id string, created int64, model string, index int, role, content string, final bool, finish, matched string, cu *usage) []byte {
	b = openai.AppendHead(b, id, "chat.completion.chunk", created, model)
	b = append(b, `,"choices":[{"index":`...)
	b = jsonw.Int(b, index)
	b = append(b, `,"delta":{"reasoning_content":null`...)
	if role != "" {
		b = append(b, `,"role":`...)
		b = jsonw.String(b, role)
	}
	if !final {
		b = append(b, `,"content":`...)
		b = jsonw.String(b, content)
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	b = jsonw.NullOrString(b, finish)
	b = append(b, `,"matched_stop":`...)
	if finish == "" {
		matched = "null"
	}
	b = append(b, matched...)
	b = append(b, "}]"...)
	if cu != nil {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, *cu, true)
	}
	return append(b, '}')
}

// appendCompletionChunk is CompletionStreamResponse.model_dump_json(): the
// choice's None token-id fields dropped, usage null unless continuous usage
// stats set it.
func appendCompletionChunk(b []byte, id string, created int64, model string, index int, text, finish, matched string, cu *usage) []byte {
	b = openai.AppendHead(b, id, "text_completion", created, model)
	b = append(b, `,"choices":[{"index":`...)
	b = jsonw.Int(b, index)
	b = append(b, `,"text":`...)
	b = jsonw.String(b, text)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = jsonw.NullOrString(b, finish)
	b = append(b, `,"matched_stop":`...)
	if finish == "" {
		matched = "null"
	}
	b = append(b, matched...)
	b = append(b, `}],"usage":`...)
	if cu != nil {
		return append(appendUsage(b, *cu, true), '}')
	}
	return append(b, "null}"...)
}

// appendUsageChunk is the final usage chunk: choices [] and usage. Chat
// dumps it with its nulls, completions with exclude_none.
func appendUsageChunk(b []byte, id, object string, created int64, model string, u usage, withNull bool) []byte {
	b = openai.AppendHead(b, id, object, created, model)
	b = append(b, `,"choices":[],"usage":`...)
	b = appendUsage(b, u, withNull)
	return append(b, '}')
}

// writeError is SGLang's flat OpenAI error:
// {"object":"error","message","type","param","code"}.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	server.RespondJSON(w, status, func(b []byte) []byte {
		b = append(b, `{"object":"error","message":`...)
		b = jsonw.String(b, msg)
		b = append(b, `,"type":`...)
		b = jsonw.String(b, typ)
		b = append(b, `,"param":null,"code":`...)
		b = jsonw.Int(b, status)
		return append(b, '}')
	})
}

// validationMessage is SGLang's handler text: str(exc) + " " + str(errors),
// FastAPI's "<n> validation error(s):\n  {...}\n" followed by the list.
func validationMessage(errs []openai.FieldError) string {
	items := make([]string, len(errs))
	for i, e := range errs {
		loc := make([]string, len(e.Loc))
		for j, l := range e.Loc {
			if _, err := strconv.Atoi(l); err == nil {
				loc[j] = l
			} else {
				loc[j] = pyrepr.Str(l)
			}
		}
		locRepr := "(" + strings.Join(loc, ", ")
		if len(loc) == 1 {
			locRepr += ","
		}
		locRepr += ")"
		s := "{'type': " + pyrepr.Str(e.Type) + ", 'loc': " + locRepr + ", 'msg': " + pyrepr.Str(e.Msg) + ", 'input': " + pyrepr.Str(e.Input)
		if e.Ctx != "" {
			s += ", 'ctx': {'error': " + pyrepr.Str(e.Ctx) + "}"
		}
		items[i] = s + "}"
	}
	label := "errors"
	if len(errs) == 1 {
		label = "error"
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(errs)) + " validation " + label + ":\n")
	for _, it := range items {
		b.WriteString("  " + it + "\n")
	}
	b.WriteString(" [" + strings.Join(items, ", ") + "]")
	return b.String()
}
