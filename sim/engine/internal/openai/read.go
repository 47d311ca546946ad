package openai

import (
	"net/http"

	"github.com/gpustack/routing-conformance/sim/engine/internal/server"
	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

// Request is a chat or completion request with its prompt as token ids.
type Request struct {
	Common
	// Messages are a chat request's messages (nil for a completion).
	Messages []tokenize.Message
	// MaxTokensNull is a completion's explicit "max_tokens": null.
	MaxTokensNull bool
	// TokenPrompt is a completion whose prompt was sent as token ids (not
	// text the server tokenizes).
	TokenPrompt bool
	// Prompt is what the engine prefills: the chat template over the
	// messages encoded, a completion's text encoded, or its token ids as sent.
	Prompt []uint32
}

// Decode decodes a /v1/chat/completions body (chat) or a /v1/completions
// body and tokenizes its prompt into prompt[:0]. A body that fails
// validation is a *ValidationError.
func Decode(body []byte, chat bool, prompt []uint32) (Request, error) {
	prompt = prompt[:0]
	if chat {
		req, err := DecodeChat(body)
		if err != nil {
			return Request{}, err
		}
		prompt = tokenize.Encode(prompt, tokenize.ApplyChatTemplate(req.Messages))
		return Request{Common: req.Common, Messages: req.Messages, Prompt: prompt}, nil
	}
	req, err := DecodeCompletion(body)
	if err != nil {
		return Request{}, err
	}
	if req.PromptIDs != nil {
		prompt = append(prompt, req.PromptIDs...)
	} else {
		prompt = tokenize.Encode(prompt, req.Prompt)
	}
	return Request{Common: req.Common, MaxTokensNull: req.MaxTokensNull, TokenPrompt: req.PromptIDs != nil, Prompt: prompt}, nil
}

// ReadRequest reads an OpenAI route's request as both engines do before
// their own checks: the media type must be application/json, the body at most
// limit bytes, then Decode. A wrong media type or an invalid body is a
// *ValidationError (both engines answer it 400 "Bad Request"); a body that
// could not be read is any other error.
func ReadRequest(r *http.Request, chat bool, limit int64, prompt []uint32) (Request, error) {
	if !server.IsJSON(r) {
		return Request{}, &ValidationError{Errors: []FieldError{{Type: "value_error", Loc: []string{"header", "content-type"}, Msg: "Unsupported Media Type: Only 'application/json' is allowed", Input: r.Header.Get("Content-Type")}}}
	}
	body, release, err := server.ReadBody(r, limit)
	if err != nil {
		return Request{}, err
	}
	// Decode copies what it keeps, so the body goes back to the pool now.
	defer release()
	return Decode(body, chat, prompt)
}
