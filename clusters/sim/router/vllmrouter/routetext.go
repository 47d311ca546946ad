package vllmrouter

// The text vllm-router routes a request by (docs/routers.md#routing-text): its
// extract_text_for_routing per request type. Chat routes on
// session_params.session_id or "", which is what drives its measured splits.

import (
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
)

// chatText is vllm-router's ChatCompletionRequest text: session_params.
// session_id when it is a string that trim() leaves non-empty, else "": a
// blank or whitespace-only id routes on "" like no id at all
// (docs/routers.md#corrections; vllm-project/router@e667ebb:src/protocols/spec.rs,
// ChatCompletionRequest::extract_text_for_routing). Whether a padded id is
// routed trimmed is not established; the sim routes on the id as sent.
func chatText(body map[string]any) string {
	sp, ok := body["session_params"].(map[string]any)
	if !ok {
		return ""
	}
	if s, ok := sp["session_id"].(string); ok && strings.TrimSpace(s) != "" {
		return s
	}
	return ""
}

// promptText is vllm-router's PromptInput text: a string; strings joined by
// " "; token ids as "token_ids:<n>"; batches as "token_ids_batch:<b>:<n>".
func promptText(p any) string {
	switch v := p.(type) {
	case string:
		return v
	case []any:
		if len(v) == 0 {
			return ""
		}
		switch v[0].(type) {
		case string:
			parts := make([]string, 0, len(v))
			for _, x := range v {
				s, _ := x.(string)
				parts = append(parts, s)
			}
			return strings.Join(parts, " ")
		case []any:
			total := 0
			for _, x := range v {
				if b, ok := x.([]any); ok {
					total += len(b)
				}
			}
			return "token_ids_batch:" + strconv.Itoa(len(v)) + ":" + strconv.Itoa(total)
		default:
			return "token_ids:" + strconv.Itoa(len(v))
		}
	}
	return ""
}

// generateText is vllm-router's GenerateRequest text: text, then prompt, then
// input_ids joined by " ".
func generateText(body map[string]any) string {
	if s, ok := body["text"].(string); ok {
		return s
	}
	if p, ok := body["prompt"]; ok && p != nil {
		return promptText(p)
	}
	return httpx.JoinTokenIDs(body["input_ids"])
}
