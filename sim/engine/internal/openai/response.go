package openai

import (
	"strconv"

	"github.com/gpustack/routing-conformance/sim/engine/internal/jsonw"
)

// What both engines' response models share, in their declared field order.
// The rest of each response (which fields, nulls present or left out) is
// the engine's own.

// AppendHead opens a response or stream chunk object:
// {"id":…,"object":…,"created":…,"model":… (no closing brace).
func AppendHead(b []byte, id, object string, created int64, model string) []byte {
	b = append(b, `{"id":`...)
	b = jsonw.String(b, id)
	b = append(b, `,"object":`...)
	b = jsonw.String(b, object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	return jsonw.String(b, model)
}

// AppendUsageCounts opens a UsageInfo object:
// {"prompt_tokens":…,"total_tokens":…,"completion_tokens":… (no closing
// brace; prompt_tokens_details is the engine's to add).
func AppendUsageCounts(b []byte, prompt, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = jsonw.Int(b, prompt)
	b = append(b, `,"total_tokens":`...)
	b = jsonw.Int(b, prompt+completion)
	b = append(b, `,"completion_tokens":`...)
	return jsonw.Int(b, completion)
}

// AppendChoices writes n choice objects separated by commas, each opened as
// {"index":i and completed by rest (which closes it): the choices array's
// contents, indexed in order as both engines index a response's choices.
func AppendChoices(b []byte, n int, rest func(b []byte, i int) []byte) []byte {
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = jsonw.Int(b, i)
		b = rest(b, i)
	}
	return b
}
