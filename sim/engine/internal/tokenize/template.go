package tokenize

import "strings"

// Message is one chat message as the template sees it.
type Message struct {
	Role    string
	Content string
}

// DefaultSystemPrompt is what Qwen2.5-Instruct's template inserts when the
// conversation has no system message.
const DefaultSystemPrompt = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// ApplyChatTemplate renders messages the way Qwen2.5-Instruct's ChatML
// template does with add_generation_prompt=true:
//
//	<|im_start|>system\n{system}<|im_end|>\n
//	<|im_start|>{role}\n{content}<|im_end|>\n ...
//	<|im_start|>assistant\n
//
// A missing system message is replaced by DefaultSystemPrompt, so every chat
// prompt starts with the same template head, as on a real Qwen deployment.
func ApplyChatTemplate(messages []Message) string {
	var b strings.Builder
	n := 64
	for _, m := range messages {
		n += len(m.Role) + len(m.Content) + 24
	}
	b.Grow(n)
	if len(messages) == 0 || messages[0].Role != "system" {
		b.WriteString("<|im_start|>system\n")
		b.WriteString(DefaultSystemPrompt)
		b.WriteString("<|im_end|>\n")
	}
	for _, m := range messages {
		b.WriteString("<|im_start|>")
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteString("<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String()
}
