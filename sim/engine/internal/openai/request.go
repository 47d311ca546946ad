// Package openai reads and decodes the OpenAI-compatible requests both
// engines accept, tokenizes their prompts, and plans what a simulated model
// generates for them. Each engine formats its own responses and errors and
// makes its own checks (model names, lengths, defaults); this package only
// reports what is wrong with a request (as pydantic would: a type, a
// location, a message).
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

// FieldError is one pydantic validation error.
type FieldError struct {
	Type string   // "missing", "json_invalid", "int_type", "value_error", ...
	Loc  []string // ("body", "messages")
	Msg  string
	// Input describes the offending input the way vLLM summarizes it
	// ("<dict of 2 items>") or is the raw string value.
	Input string
	// Ctx is pydantic's ctx.error text, if any.
	Ctx string
}

// ValidationError is a request that failed schema validation (HTTP 400 on
// both engines, which replace FastAPI's 422).
type ValidationError struct{ Errors []FieldError }

func (e *ValidationError) Error() string {
	if len(e.Errors) == 0 {
		return "validation error"
	}
	return e.Errors[0].Msg
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	// IncludeUsage is nil when the client did not set it (vLLM then defaults
	// it to true, SGLang to false).
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats bool  `json:"continuous_usage_stats"`
}

// Common is what chat and completion requests share.
type Common struct {
	Model         string
	Stream        bool
	StreamOptions *StreamOptions
	// MaxTokens is max_completion_tokens, else max_tokens; -1 when absent.
	MaxTokens int
	// MaxTokensField names the field MaxTokens came from
	// ("max_completion_tokens" or "max_tokens"; "" when absent).
	MaxTokensField string
	N              int
	IgnoreEOS      bool
	MinTokens      int
	RequestID      string // vLLM's request_id body field
	CacheSalt      string // vLLM's cache_salt
	PromptLogprobs bool   // vLLM skips the prefix cache for prompt_logprobs
	// Stop are the stop strings (a single string is a list of one).
	Stop []string
	// StopTokenIDs are the stop_token_ids.
	StopTokenIDs []uint32
	// IncludeStopStr is vLLM's include_stop_str_in_output.
	IncludeStopStr bool
	// NoStopTrim is SGLang's no_stop_trim.
	NoStopTrim bool
	// Sampling holds the sampling parameters the request set.
	Sampling Sampling
	// KVTransferParams is vLLM's kv_transfer_params as sent (a copy; nil
	// when absent or null). The engine validates and reads it.
	KVTransferParams json.RawMessage
}

// Sampling is the sampling parameters a request set; nil means absent or
// null. The engines only validate them (the filler output ignores them).
type Sampling struct {
	Temperature, TopP, MinP                              *float64
	PresencePenalty, FrequencyPenalty, RepetitionPenalty *float64
	TopK                                                 *int
}

// ChatRequest is a decoded /v1/chat/completions body.
type ChatRequest struct {
	Common
	Messages []tokenize.Message
}

// CompletionRequest is a decoded /v1/completions body.
type CompletionRequest struct {
	Common
	// Prompt is the text prompt; PromptIDs is set instead for token-id prompts.
	Prompt    string
	PromptIDs []uint32
	// MaxTokensNull is an explicit "max_tokens": null (SGLang refuses it).
	MaxTokensNull bool
}

type rawCommon struct {
	Model               *string          `json:"model"`
	Stream              *bool            `json:"stream"`
	StreamOptions       *json.RawMessage `json:"stream_options"`
	MaxTokens           json.RawMessage  `json:"max_tokens"` // not a pointer: an explicit null must stay visible
	MaxCompletionTokens *json.RawMessage `json:"max_completion_tokens"`
	N                   *json.RawMessage `json:"n"`
	IgnoreEOS           *bool            `json:"ignore_eos"`
	MinTokens           *json.RawMessage `json:"min_tokens"`
	RequestID           *string          `json:"request_id"`
	CacheSalt           *string          `json:"cache_salt"`
	PromptLogprobs      *json.RawMessage `json:"prompt_logprobs"`
	Stop                *json.RawMessage `json:"stop"`
	StopTokenIDs        *json.RawMessage `json:"stop_token_ids"`
	IncludeStopStr      *bool            `json:"include_stop_str_in_output"`
	NoStopTrim          *bool            `json:"no_stop_trim"`
	Temperature         *json.RawMessage `json:"temperature"`
	TopP                *json.RawMessage `json:"top_p"`
	MinP                *json.RawMessage `json:"min_p"`
	TopK                *json.RawMessage `json:"top_k"`
	PresencePenalty     *json.RawMessage `json:"presence_penalty"`
	FrequencyPenalty    *json.RawMessage `json:"frequency_penalty"`
	RepetitionPenalty   *json.RawMessage `json:"repetition_penalty"`
	KVTransferParams    *json.RawMessage `json:"kv_transfer_params"`
}

type rawChat struct {
	rawCommon
	Messages *json.RawMessage `json:"messages"`
}

type rawCompletion struct {
	rawCommon
	Prompt *json.RawMessage `json:"prompt"`
}

type rawMessage struct {
	Role    *string          `json:"role"`
	Content *json.RawMessage `json:"content"`
}

// DecodeChat decodes and validates a chat completion body.
func DecodeChat(body []byte) (*ChatRequest, error) {
	var raw rawChat
	if err := decode(body, &raw); err != nil {
		return nil, err
	}
	req := &ChatRequest{}
	var errs []FieldError
	errs = raw.common(&req.Common, errs)
	if raw.Messages == nil || isNull(*raw.Messages) {
		errs = append(errs, FieldError{Type: "missing", Loc: []string{"body", "messages"}, Msg: "Field required", Input: dictSummary(countFields(body))})
	} else {
		var msgs []rawMessage
		if err := json.Unmarshal(*raw.Messages, &msgs); err != nil {
			errs = append(errs, FieldError{Type: "list_type", Loc: []string{"body", "messages"}, Msg: "Input should be a valid list", Input: string(*raw.Messages)})
		} else {
			for i, m := range msgs {
				loc := []string{"body", "messages", strconv.Itoa(i)}
				if m.Role == nil {
					errs = append(errs, FieldError{Type: "missing", Loc: append(loc, "role"), Msg: "Field required", Input: "<dict>"})
					continue
				}
				text, ferr := contentText(m.Content, loc)
				if ferr != nil {
					errs = append(errs, *ferr)
					continue
				}
				req.Messages = append(req.Messages, tokenize.Message{Role: *m.Role, Content: text})
			}
		}
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Errors: errs}
	}
	return req, nil
}

// contentText flattens a message's content: a string, null, or a list of
// parts whose "text" parts are joined with newlines (vLLM's string content
// format for text-only parts).
func contentText(raw *json.RawMessage, loc []string) (string, *FieldError) {
	if raw == nil || isNull(*raw) {
		return "", nil
	}
	b := bytes.TrimSpace(*raw)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return "", &FieldError{Type: "string_type", Loc: append(loc, "content"), Msg: "Input should be a valid string", Input: string(b)}
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return "", &FieldError{Type: "string_type", Loc: append(loc, "content"), Msg: "Input should be a valid string", Input: string(b)}
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// DecodeCompletion decodes and validates a completion body.
func DecodeCompletion(body []byte) (*CompletionRequest, error) {
	var raw rawCompletion
	if err := decode(body, &raw); err != nil {
		return nil, err
	}
	req := &CompletionRequest{}
	var errs []FieldError
	errs = raw.common(&req.Common, errs)
	if raw.MaxTokens != nil && isNull(raw.MaxTokens) {
		req.MaxTokensNull = true
	}
	if raw.Prompt == nil || isNull(*raw.Prompt) {
		errs = append(errs, FieldError{Type: "missing", Loc: []string{"body", "prompt"}, Msg: "Field required", Input: dictSummary(countFields(body))})
	} else if ferr := req.setPrompt(bytes.TrimSpace(*raw.Prompt)); ferr != nil {
		errs = append(errs, *ferr)
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Errors: errs}
	}
	return req, nil
}

// ErrBatchPrompt is returned for a completion with several prompts, which the
// simulator does not serve (one prompt per request).
var ErrBatchPrompt = errors.New("the simulated engine serves one prompt per request; send a batch as separate requests")

func (req *CompletionRequest) setPrompt(b []byte) *FieldError {
	bad := &FieldError{Type: "string_type", Loc: []string{"body", "prompt"}, Msg: "Input should be a valid string", Input: string(b)}
	switch {
	case len(b) > 0 && b[0] == '"':
		if err := json.Unmarshal(b, &req.Prompt); err != nil {
			return bad
		}
		return nil
	case len(b) > 0 && b[0] == '[':
		var any []json.RawMessage
		if err := json.Unmarshal(b, &any); err != nil || len(any) == 0 {
			return bad
		}
		first := bytes.TrimSpace(any[0])
		switch {
		case first[0] == '"': // list of strings
			if len(any) > 1 {
				return &FieldError{Type: "value_error", Loc: []string{"body", "prompt"}, Msg: ErrBatchPrompt.Error(), Input: string(b)}
			}
			_ = json.Unmarshal(first, &req.Prompt)
			return nil
		case first[0] == '[': // list of token-id lists
			if len(any) > 1 {
				return &FieldError{Type: "value_error", Loc: []string{"body", "prompt"}, Msg: ErrBatchPrompt.Error(), Input: string(b)}
			}
			if err := json.Unmarshal(first, &req.PromptIDs); err != nil {
				return bad
			}
			return nil
		default: // one token-id list
			if err := json.Unmarshal(b, &req.PromptIDs); err != nil {
				return bad
			}
			return nil
		}
	}
	return bad
}

func (raw *rawCommon) common(c *Common, errs []FieldError) []FieldError {
	if raw.Model != nil {
		c.Model = *raw.Model
	}
	if raw.Stream != nil {
		c.Stream = *raw.Stream
	}
	if raw.IgnoreEOS != nil {
		c.IgnoreEOS = *raw.IgnoreEOS
	}
	if raw.RequestID != nil {
		c.RequestID = *raw.RequestID
	}
	if raw.CacheSalt != nil {
		c.CacheSalt = *raw.CacheSalt
	}
	if raw.StreamOptions != nil && !isNull(*raw.StreamOptions) {
		var so StreamOptions
		if err := json.Unmarshal(*raw.StreamOptions, &so); err != nil {
			errs = append(errs, FieldError{Type: "model_type", Loc: []string{"body", "stream_options"}, Msg: "Input should be a valid dictionary or instance of StreamOptions", Input: string(*raw.StreamOptions)})
		} else {
			c.StreamOptions = &so
		}
	}
	c.MaxTokens = -1
	var maxTokens *json.RawMessage
	if raw.MaxTokens != nil {
		maxTokens = &raw.MaxTokens
	}
	if n, present, ferr := optInt(maxTokens, "max_tokens"); ferr != nil {
		errs = append(errs, *ferr)
	} else if present {
		c.MaxTokens, c.MaxTokensField = n, "max_tokens"
	}
	if n, present, ferr := optInt(raw.MaxCompletionTokens, "max_completion_tokens"); ferr != nil {
		errs = append(errs, *ferr)
	} else if present {
		c.MaxTokens, c.MaxTokensField = n, "max_completion_tokens"
	}
	for _, f := range []struct {
		raw  *json.RawMessage
		name string
		dst  **float64
	}{
		{raw.Temperature, "temperature", &c.Sampling.Temperature},
		{raw.TopP, "top_p", &c.Sampling.TopP},
		{raw.MinP, "min_p", &c.Sampling.MinP},
		{raw.PresencePenalty, "presence_penalty", &c.Sampling.PresencePenalty},
		{raw.FrequencyPenalty, "frequency_penalty", &c.Sampling.FrequencyPenalty},
		{raw.RepetitionPenalty, "repetition_penalty", &c.Sampling.RepetitionPenalty},
	} {
		if v, present, ferr := optFloat(f.raw, f.name); ferr != nil {
			errs = append(errs, *ferr)
		} else if present {
			*f.dst = &v
		}
	}
	if n, present, ferr := optInt(raw.TopK, "top_k"); ferr != nil {
		errs = append(errs, *ferr)
	} else if present {
		c.Sampling.TopK = &n
	}
	c.N = 1
	if n, present, ferr := optInt(raw.N, "n"); ferr != nil {
		errs = append(errs, *ferr)
	} else if present {
		c.N = n
	}
	if n, present, ferr := optInt(raw.MinTokens, "min_tokens"); ferr != nil {
		errs = append(errs, *ferr)
	} else if present {
		c.MinTokens = n
	}
	if raw.KVTransferParams != nil && !isNull(*raw.KVTransferParams) {
		c.KVTransferParams = append(json.RawMessage(nil), bytes.TrimSpace(*raw.KVTransferParams)...)
	}
	if raw.PromptLogprobs != nil && !isNull(*raw.PromptLogprobs) {
		c.PromptLogprobs = true
	}
	if raw.IncludeStopStr != nil {
		c.IncludeStopStr = *raw.IncludeStopStr
	}
	if raw.NoStopTrim != nil {
		c.NoStopTrim = *raw.NoStopTrim
	}
	if raw.Stop != nil && !isNull(*raw.Stop) {
		b := bytes.TrimSpace(*raw.Stop)
		var one string
		if err := json.Unmarshal(b, &one); err == nil {
			c.Stop = []string{one}
		} else if err := json.Unmarshal(b, &c.Stop); err != nil {
			// A str | list[str] union: pydantic reports each member.
			errs = append(errs,
				FieldError{Type: "string_type", Loc: []string{"body", "stop", "str"}, Msg: "Input should be a valid string", Input: string(b)},
				FieldError{Type: "list_type", Loc: []string{"body", "stop", "list[str]"}, Msg: "Input should be a valid list", Input: string(b)})
		}
	}
	if raw.StopTokenIDs != nil && !isNull(*raw.StopTokenIDs) {
		if err := json.Unmarshal(*raw.StopTokenIDs, &c.StopTokenIDs); err != nil {
			errs = append(errs, FieldError{Type: "list_type", Loc: []string{"body", "stop_token_ids"}, Msg: "Input should be a valid list", Input: string(*raw.StopTokenIDs)})
		}
	}
	return errs
}

// optInt reads an optional integer field as pydantic's lax mode does: a
// JSON integer, a float without a fractional part, or a string holding an
// integer.
func optInt(raw *json.RawMessage, name string) (int, bool, *FieldError) {
	if raw == nil || isNull(*raw) {
		return 0, false, nil
	}
	b := bytes.TrimSpace(*raw)
	loc := []string{"body", name}
	var s string
	if json.Unmarshal(b, &s) == nil {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return 0, false, &FieldError{Type: "int_parsing", Loc: loc, Msg: "Input should be a valid integer, unable to parse string as an integer", Input: s}
		}
		return n, true, nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, false, &FieldError{Type: "int_type", Loc: loc, Msg: "Input should be a valid integer", Input: string(b)}
	}
	if f != math.Trunc(f) {
		return 0, false, &FieldError{Type: "int_from_float", Loc: loc, Msg: "Input should be a valid integer, got a number with a fractional part", Input: string(b)}
	}
	return int(f), true, nil
}

// optFloat reads an optional number field as pydantic's lax mode does: a
// JSON number or a string holding one.
func optFloat(raw *json.RawMessage, name string) (float64, bool, *FieldError) {
	if raw == nil || isNull(*raw) {
		return 0, false, nil
	}
	b := bytes.TrimSpace(*raw)
	loc := []string{"body", name}
	var s string
	if json.Unmarshal(b, &s) == nil {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, false, &FieldError{Type: "float_parsing", Loc: loc, Msg: "Input should be a valid number, unable to parse string as a number", Input: s}
		}
		return f, true, nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, false, &FieldError{Type: "float_type", Loc: loc, Msg: "Input should be a valid number", Input: string(b)}
	}
	return f, true, nil
}

func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

func dictSummary(n int) string { return fmt.Sprintf("<dict of %d items>", n) }

// decode unmarshals body into v. Errors come back as pydantic would report
// them: json_invalid for a syntax error, model_attributes_type for a body
// that is not an object, <kind>_type for a field of the wrong type.
func decode(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || len(bytes.TrimSpace(body)) == 0 {
		// Python's json reports the index of the offending character; at
		// the end of the input that is len(body).
		pos := len(body)
		if se != nil && se.Offset < int64(len(body)) {
			pos = int(max(se.Offset-1, 0))
		}
		return &ValidationError{Errors: []FieldError{{Type: "json_invalid", Loc: []string{"body", strconv.Itoa(pos)}, Msg: "JSON decode error", Input: "{}", Ctx: "Expecting value"}}}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return &ValidationError{Errors: []FieldError{{Type: "model_attributes_type", Loc: []string{"body"}, Msg: "Input should be a valid dictionary or object to extract fields from", Input: string(body)}}}
		}
		kind := te.Type.Kind().String()
		return &ValidationError{Errors: []FieldError{{Type: kind + "_type", Loc: append([]string{"body"}, strings.Split(te.Field, ".")...), Msg: "Input should be a valid " + kind, Input: te.Value}}}
	}
	return &ValidationError{Errors: []FieldError{{Type: "value_error", Loc: []string{"body"}, Msg: err.Error()}}}
}

// countFields counts a JSON object's top-level keys; only error paths need it.
func countFields(body []byte) int {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(body, &fields)
	return len(fields)
}
