package sglanggateway

// The text sgl-model-gateway routes a request by (docs/routers.md#routing-text):
// its extract_text_for_routing per request type. Chat routes on the text of
// every message, which is what drives its measured splits; the PD router
// reads only the first message.

import (
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/httpx"
)

// chatText is sgl-model-gateway's ChatCompletionRequest text: the text of every
// message joined by single spaces (system/user/tool/developer content,
// assistant content then reasoning_content, function content); text parts
// only, no role names.
func chatText(body map[string]any) string {
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

// pdChatText is the SG PD router's chat text: the first message only — user
// or developer plain-string content, or system content (parts joined).
func pdChatText(body map[string]any) string {
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

// promptText is sgl-model-gateway's completion text: the prompt string, or the
// array joined by " ".
func promptText(p any) string {
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

// pdPromptText is the SG PD router's completion text: the string, or the
// array's first element.
func pdPromptText(p any) string {
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

// generateText is sgl-model-gateway's GenerateRequest text: text, then
// input_ids (batches flattened) joined by " ".
func generateText(body map[string]any) string {
	if s, ok := body["text"].(string); ok {
		return s
	}
	return httpx.JoinTokenIDs(body["input_ids"])
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
