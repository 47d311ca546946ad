package traffic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// classify names the outcome of one request. The order matters: what the
// server answered comes first, then the run's and the request's contexts
// (whose errors surface as many different read errors), then the error's kind.
func classify(err error, ex *exchange, runCtx, reqCtx context.Context) (Class, string) {
	if s := ex.status; s != 0 && (s < 200 || s >= 300) {
		msg := fmt.Sprintf("HTTP %d", s)
		if err != nil {
			msg += ": " + err.Error()
		}
		switch {
		case s >= 400 && s < 500:
			return ClassHTTP4xx, msg
		case s >= 500 && s < 600:
			return ClassHTTP5xx, msg
		default:
			return ClassHTTPOther, msg
		}
	}
	if ex.mergeErr != nil {
		return ClassOther, ex.mergeErr.Error()
	}
	if errors.As(err, new(streamEnd)) {
		switch {
		case !ex.sawDone && ex.chunks == 0 && !isEventStream(ex.header):
			return ClassMalformedSSE, fmt.Sprintf("a stream was asked for but the answer is Content-Type %q with no SSE events", ex.header.Get("Content-Type"))
		case !ex.sawDone:
			return ClassStreamCut, fmt.Sprintf("stream ended after %d chunks without data: [DONE]", ex.chunks)
		case ex.finish == "":
			return ClassStreamCut, fmt.Sprintf("stream ended with data: [DONE] after %d chunks but no finish_reason", ex.chunks)
		default:
			return ClassOK, ""
		}
	}
	if err == nil {
		return ClassOK, ""
	}
	if runCtx.Err() != nil {
		return ClassCanceled, err.Error()
	}
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err) {
		return ClassTimeout, err.Error()
	}
	if ex.status == 0 {
		if ex.sentAt.IsZero() {
			return ClassOther, "not sent: " + err.Error()
		}
		if isConnectError(err) {
			return ClassConnect, err.Error()
		}
		return ClassTransport, err.Error()
	}
	if ex.stream {
		var apiErr *openai.APIError
		switch {
		case errors.As(err, &apiErr):
			return ClassStreamError, err.Error()
		case isJSONError(err), errors.Is(err, openai.ErrTooManyEmptyStreamMessages):
			return ClassMalformedSSE, err.Error()
		default:
			return ClassStreamCut, fmt.Sprintf("stream broke after %d chunks: %v", ex.chunks, err)
		}
	}
	if isJSONError(err) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return ClassMalformedBody, err.Error()
	}
	return ClassTransport, err.Error()
}

func isEventStream(h http.Header) bool {
	ct := strings.ToLower(h.Get("Content-Type"))
	return strings.HasPrefix(ct, "text/event-stream")
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isConnectError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

func isJSONError(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ)
}

// apiErrorFields returns type, message and code of an in-band error event.
func apiErrorFields(err error) (typ, msg, code string) {
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		return "", "", ""
	}
	if apiErr.Code != nil {
		code = fmt.Sprint(apiErr.Code)
	}
	return apiErr.Type, apiErr.Message, code
}

// parseErrorBody reads an OpenAI-style error body in either shape: nested
// {"error":{"message","type","code",...}} (vLLM >= 0.10.1, both routers) or
// flat {"object":"error","message","type","code",...} (SGLang, older vLLM).
func parseErrorBody(body []byte) (typ, msg, code string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return "", "", ""
	}
	if nested, ok := fields["error"]; ok {
		var inner map[string]json.RawMessage
		if json.Unmarshal(nested, &inner) == nil {
			fields = inner
		} else {
			var s string
			if json.Unmarshal(nested, &s) == nil {
				return "", s, ""
			}
		}
	}
	return jsonScalar(fields["type"]), jsonScalar(fields["message"]), jsonScalar(fields["code"])
}

// jsonScalar renders a JSON string without quotes and other scalars as
// written; null and absent give "".
func jsonScalar(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}
