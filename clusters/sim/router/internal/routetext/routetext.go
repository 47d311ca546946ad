// Package routetext extracts the text each router routes a request by
// (docs/routers.md#routing-text): the routers' extract_text_for_routing. This is
// the difference that drives the measured splits: VR chat routes on
// session_params.session_id or "", SG chat on all message texts.
package routetext

import (
	"encoding/json"
	"strconv"
	"strings"
)

// VRChat is vllm-router's ChatCompletionRequest text: session_params.
// session_id when it is a non-empty string, else "".
func VRChat(body map[string]any) string {
	sp, ok := body["session_params"].(map[string]any)
	if !ok {
		return ""
	}
	if s, ok := sp["session_id"].(string); ok {
		return s
	}
	return ""
}

// VRPrompt is vllm-router's PromptInput text: a string; strings joined by
// " "; token ids as "token_ids:<n>"; batches as "token_ids_batch:<b>:<n>".
func VRPrompt(p any) string {
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

// VRGenerate is vllm-router's GenerateRequest text: text, then prompt, then
// input_ids joined by " ".
func VRGenerate(body map[string]any) string {
	if s, ok := body["text"].(string); ok {
		return s
	}
	if p, ok := body["prompt"]; ok && p != nil {
		return VRPrompt(p)
	}
	return joinIDs(body["input_ids"])
}

// SGChat is sgl-model-gateway's ChatCompletionRequest text: the text of every
// message joined by single spaces (system/user/tool/developer content,
// assistant content then reasoning_content, function content); text parts
// only, no role names.
func SGChat(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	var b strings.Builder
	has := false
	appendContent := func(c any) {
		if !hasText(c) {
			return
		}
		if has {
			b.WriteByte(' ')
		}
		appendText(&b, c)
		has = true
	}
	for _, m := range msgs {
		msg, ok := m.(map[string]any)
		if !ok {
			continue
		}
		role, _ := msg["role"].(string)
		switch role {
		case "system", "user", "tool", "developer":
			appendContent(msg["content"])
		case "assistant":
			if c, ok := msg["content"]; ok && c != nil {
				appendContent(c)
			}
			if r, ok := msg["reasoning_content"].(string); ok && r != "" {
				if has {
					b.WriteByte(' ')
				}
				b.WriteString(r)
				has = true
			}
		case "function":
			if c, ok := msg["content"].(string); ok && c != "" {
				if has {
					b.WriteByte(' ')
				}
				b.WriteString(c)
				has = true
			}
		}
	}
	return b.String()
}

// SGPDChat is the SG PD router's chat text: the first message only — user
// or developer plain-string content, or system content (parts joined).
func SGPDChat(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return ""
	}
	msg, _ := msgs[0].(map[string]any)
	role, _ := msg["role"].(string)
	switch role {
	case "user", "developer":
		s, _ := msg["content"].(string)
		return s
	case "system":
		var b strings.Builder
		appendText(&b, msg["content"])
		return b.String()
	}
	return ""
}

// SGPrompt is sgl-model-gateway's completion text: the prompt string, or the
// array joined by " ".
func SGPrompt(p any) string {
	switch v := p.(type) {
	case string:
		return v
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			s, _ := x.(string)
			parts = append(parts, s)
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// SGPDPrompt is the SG PD router's completion text: the string, or the
// array's first element.
func SGPDPrompt(p any) string {
	switch v := p.(type) {
	case string:
		return v
	case []any:
		if len(v) > 0 {
			s, _ := v[0].(string)
			return s
		}
	}
	return ""
}

// SGGenerate is sgl-model-gateway's GenerateRequest text: text, then
// input_ids (batches flattened) joined by " ".
func SGGenerate(body map[string]any) string {
	if s, ok := body["text"].(string); ok {
		return s
	}
	return joinIDs(body["input_ids"])
}

func joinIDs(v any) string {
	arr, ok := v.([]any)
	if !ok {
		return ""
	}
	var parts []string
	for _, x := range arr {
		switch t := x.(type) {
		case []any:
			for _, y := range t {
				parts = append(parts, num(y))
			}
		default:
			parts = append(parts, num(t))
		}
	}
	return strings.Join(parts, " ")
}

func num(v any) string {
	switch t := v.(type) {
	case json.Number:
		return t.String()
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return ""
}

// hasText is MessageContent::has_text: a non-empty string, or any non-empty
// text part.
func hasText(c any) bool {
	switch v := c.(type) {
	case string:
		return v != ""
	case []any:
		for _, p := range v {
			if part, ok := p.(map[string]any); ok && part["type"] == "text" {
				if s, _ := part["text"].(string); s != "" {
					return true
				}
			}
		}
	}
	return false
}

// appendText is MessageContent::append_text_to: text parts joined by " ".
func appendText(b *strings.Builder, c any) {
	switch v := c.(type) {
	case string:
		b.WriteString(v)
	case []any:
		first := true
		for _, p := range v {
			part, ok := p.(map[string]any)
			if !ok || part["type"] != "text" {
				continue
			}
			s, _ := part["text"].(string)
			if s == "" {
				continue
			}
			if !first {
				b.WriteByte(' ')
			}
			b.WriteString(s)
			first = false
		}
	}
}
