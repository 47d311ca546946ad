package vllmrouter

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/rust/debug"
)

// The vLLM P/D router takes the typed request (ChatCompletionRequest,
// CompletionRequest) back to JSON with serde_json::to_value: every field
// with a serde default is present whether the client sent it or not, the
// f32 fields are widened from f32, and objects keep their keys in
// alphabetical order (serde_json's Map without preserve_order). That value
// is both the text its policies route by (serde_json::to_string) and the
// body each leg starts from (vllm-project/router@v0.1.15:src/protocols/spec.rs,
// src/routers/http/vllm_pd_router.rs route_chat, route_completion; seen on
// the wheel's prefill and decode bodies).

// typedDefaults are the fields serialised even when absent, with their
// serde defaults, per route.
var typedDefaults = map[string]map[string]any{
	"/v1/chat/completions": {
		"stream": false, "logprobs": false, "no_stop_trim": false, "ignore_eos": false,
		"add_generation_prompt": true, "continue_final_message": false, "skip_special_tokens": true,
		"separate_reasoning": true, "stream_reasoning": true, "return_hidden_states": false,
		"include_reasoning": true,
	},
	"/v1/completions": {
		"stream": false, "echo": false, "no_stop_trim": false, "ignore_eos": false,
		"skip_special_tokens": true, "return_hidden_states": false,
	},
}

// typedF32 are the fields typed f32 in both requests (logit_bias's values
// too): a client's 0.7 is 0.699999988079071 once widened.
var typedF32 = []string{"temperature", "top_p", "presence_penalty", "frequency_penalty", "min_p", "repetition_penalty"}

// f32 is a number that went through an f32 field.
type f32 float32

// MarshalJSON writes it as serde_json writes the widened f64.
func (f f32) MarshalJSON() ([]byte, error) { return []byte(serdeFloat(float64(float32(f)))), nil }

// typedRequest is obj as the P/D router holds it for route. Routes other
// than chat and completions are returned as they came.
func typedRequest(route string, obj map[string]any) map[string]any {
	defaults, ok := typedDefaults[route]
	if !ok {
		return obj
	}
	out := maps.Clone(obj)
	for k, v := range defaults {
		if _, has := out[k]; !has {
			out[k] = v
		}
	}
	for _, k := range typedF32 {
		if n, ok := out[k].(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				out[k] = f32(f)
			}
		}
	}
	if lb, ok := out["logit_bias"].(map[string]any); ok {
		widened := make(map[string]any, len(lb))
		for k, v := range lb {
			if n, ok := v.(json.Number); ok {
				if f, err := n.Float64(); err == nil {
					v = f32(f)
				}
			}
			widened[k] = v
		}
		out["logit_bias"] = widened
	}
	return out
}

// serdeString is serde_json::to_string of a value decoded with UseNumber
// (numbers as json.Number, widened f32 as f32).
func serdeString(v any) string {
	var b strings.Builder
	writeSerde(&b, v)
	return b.String()
}

func writeSerde(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		writeSerdeString(b, x)
	case json.Number:
		b.WriteString(serdeNumber(x))
	case f32:
		b.WriteString(serdeFloat(float64(float32(x))))
	case float64:
		b.WriteString(serdeFloat(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeSerde(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeSerdeString(b, k)
			b.WriteByte(':')
			writeSerde(b, x[k])
		}
		b.WriteByte('}')
	default:
		raw, _ := json.Marshal(x)
		b.Write(raw)
	}
}

// serdeNumber keeps an integer as written and writes any other number as
// the f64 serde_json parsed it into.
func serdeNumber(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return s
		}
		if _, err := strconv.ParseUint(s, 10, 64); err == nil {
			return s
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return serdeFloat(f)
}

// serdeFloat is ryu's shortest form as serde_json prints an f64: ".0" on
// whole numbers, exponent form outside 1e-5..1e16, null for what JSON
// cannot hold.
func serdeFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "null"
	}
	return debug.Shortest(f, 64, 1e-5)
}

// writeSerdeString escapes as serde_json does: quotes, backslashes and
// control characters only (\b \f \n \r \t by name, others as \u00XX).
func writeSerdeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&0xf])
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
