package openai

import (
	"math/rand/v2"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/tokenize"
)

// Output is what the simulated model generates for one request: a fixed
// sequence of filler words. Left alone it "wants" to say Natural tokens, the
// last of which is the end-of-turn token (finish_reason "stop", counted in
// completion_tokens as both engines count the stop token). A max_tokens below
// that cuts it short (finish_reason "length"); ignore_eos makes it run to
// max_tokens; min_tokens holds the end-of-turn token back.
type Output struct {
	// Tokens is the number of generated tokens (completion_tokens).
	Tokens int
	// Finish is "stop" or "length".
	Finish string
}

// Finish reasons. Abort is a request that ended before its output did (the
// client went away), which both engines report as "abort".
const (
	FinishStop   = "stop"
	FinishLength = "length"
	FinishAbort  = "abort"
)

// Plan decides the output. maxTokens < 0 means the request set no limit.
func Plan(maxTokens, natural, minTokens int, ignoreEOS bool) Output {
	natural = max(natural, minTokens+1, 1)
	if maxTokens >= 0 && (ignoreEOS || maxTokens < natural) {
		return Output{Tokens: maxTokens, Finish: FinishLength}
	}
	return Output{Tokens: natural, Finish: FinishStop}
}

// IsEOS reports whether token i is the end-of-turn token (no text).
func (o Output) IsEOS(i int) bool { return o.Finish == FinishStop && i == o.Tokens-1 }

// TokenText is the text of generated token i ("" for the end-of-turn token).
func (o Output) TokenText(i int) string {
	if o.IsEOS(i) {
		return ""
	}
	return tokenize.TokenText(i)
}

// Text is the whole generated text.
func (o Output) Text() string {
	var b strings.Builder
	b.Grow(o.Tokens * tokenize.BytesPerToken)
	for i := range o.Tokens {
		b.WriteString(o.TokenText(i))
	}
	return b.String()
}

// AppendIDs appends the generated token ids (the end-of-turn token is
// <|im_end|>), which the prefix caches store after the prompt.
func (o Output) AppendIDs(dst []uint32) []uint32 {
	for i := range o.Tokens {
		if o.IsEOS(i) {
			dst = append(dst, tokenize.IMEnd)
		} else {
			dst = append(dst, tokenize.TokenID(i))
		}
	}
	return dst
}

// NewID returns a random uuid4 as 32 hex digits (Python's uuid.uuid4().hex),
// which both engines use for request ids.
func NewID() string {
	var b [16]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		b[i] = byte(hi >> (8 * i))
		b[8+i] = byte(lo >> (8 * i))
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	const hexd = "0123456789abcdef"
	var out [32]byte
	for i, c := range b {
		out[2*i] = hexd[c>>4]
		out[2*i+1] = hexd[c&0xf]
	}
	return string(out[:])
}
