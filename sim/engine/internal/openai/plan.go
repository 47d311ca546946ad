package openai

import (
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/sim/engine/internal/tokenize"
)

// Output is what the simulated model generates for one request: a fixed
// sequence of filler words. Left alone it "wants" to say Natural tokens, the
// last of which is the end-of-turn token (finish_reason "stop", counted in
// completion_tokens as both engines count the stop token). A max_tokens below
// that cuts it short (finish_reason "length"); ignore_eos makes it run to
// max_tokens; min_tokens holds the end-of-turn token back. A stop string or
// stop token id the request names ends it earlier (see Output.Stop).
type Output struct {
	// Tokens is the number of generated tokens (completion_tokens).
	Tokens int
	// Finish is "stop" or "length".
	Finish string
	// StopStr is the request's stop string that ended the output; "" when
	// something else did.
	StopStr string
	// StopToken is the request's stop token id that ended the output, valid
	// when HasStopToken (the end-of-turn token is not one of these).
	StopToken    uint32
	HasStopToken bool
	// Trim is set when a stop string or stop token ended the output; the
	// text kept is then its first Cut bytes.
	Trim bool
	Cut  int
}

// Finish reasons. Abort is a request that ended before its output did (the
// client went away), which both engines report as "abort".
const (
	FinishStop   = "stop"
	FinishLength = "length"
	FinishAbort  = "abort"
)

// Plan decides the output before stop strings and stop token ids are
// applied. maxTokens < 0 means no limit (callers that know the engine's
// default limit pass it instead). With ignoreEOS the end-of-turn token is
// never produced, so only the limit ends the output ("length").
func Plan(maxTokens, natural, minTokens int, ignoreEOS bool) Output {
	natural = max(natural, minTokens+1, 1)
	if maxTokens >= 0 && (ignoreEOS || maxTokens < natural) {
		return Output{Tokens: maxTokens, Finish: FinishLength}
	}
	return Output{Tokens: natural, Finish: FinishStop}
}

// StopRules are a request's stop strings and stop token ids and how its
// engine applies them.
type StopRules struct {
	// Strings are the request's stop strings, in the order it listed them.
	Strings []string
	// TokenIDs are the request's stop_token_ids.
	TokenIDs []uint32
	// Keep keeps the matched stop string (and stop token text) in the
	// output: vLLM's include_stop_str_in_output, SGLang's no_stop_trim.
	Keep bool
	// MinTokens: stop strings are only looked for once more than this many
	// tokens were generated (vLLM's detokenizer; SGLang passes 0), and stop
	// token ids are held back until then (both engines' min_tokens).
	MinTokens int
	// ListOrder picks, among stop strings completed by the same token, the
	// first one listed (SGLang); otherwise the one that completes earliest
	// in the text, ties by list order (vLLM).
	ListOrder bool
	// TokensFirst checks stop token ids before stop strings on the same
	// token (vLLM's engine core finishes on the token before its
	// detokenizer looks at text; SGLang checks strings first).
	TokensFirst bool
	// IgnoreTokenIDs drops stop token ids (SGLang skips all token-based
	// stops under ignore_eos; vLLM keeps them).
	IgnoreTokenIDs bool
}

// Stop applies r to o: the output ends at the first generated token that
// completes a stop string or is a stop token id, with finish "stop" and the
// match recorded. Generated filler tokens are examined, not the end-of-turn
// token. The output is unchanged when nothing matches.
func (o Output) Stop(r StopRules) Output {
	if len(r.Strings) == 0 && (len(r.TokenIDs) == 0 || r.IgnoreTokenIDs) {
		return o
	}
	var text strings.Builder
	checked := 0 // text before this offset was already searched
	for i := range o.Tokens {
		if o.IsEOS(i) {
			break
		}
		n := i + 1
		before := text.Len()
		tokenStop := !r.IgnoreTokenIDs && n > r.MinTokens && slices.Contains(r.TokenIDs, tokenize.TokenID(i))
		if tokenStop && r.TokensFirst {
			return o.stopOnToken(i, before, r.Keep)
		}
		text.WriteString(tokenize.TokenText(i))
		if n <= r.MinTokens {
			checked = text.Len()
			continue
		}
		if s, at, ok := findStop(text.String(), checked, r); ok {
			cut := at
			if r.Keep {
				cut = at + len(s)
			}
			return Output{Tokens: n, Finish: FinishStop, StopStr: s, Trim: true, Cut: cut}
		}
		checked = text.Len()
		if tokenStop {
			return o.stopOnToken(i, before, r.Keep)
		}
	}
	return o
}

func (o Output) stopOnToken(i, textBefore int, keep bool) Output {
	cut := textBefore
	if keep {
		cut += len(tokenize.TokenText(i))
	}
	return Output{Tokens: i + 1, Finish: FinishStop, StopToken: tokenize.TokenID(i), HasStopToken: true, Trim: true, Cut: cut}
}

// findStop looks for a stop string completed in text after offset from
// (a match may begin before it), returning the chosen string and where it
// begins.
func findStop(text string, from int, r StopRules) (string, int, bool) {
	best, bestAt, bestEnd := "", -1, 0
	for _, s := range r.Strings {
		if s == "" {
			continue
		}
		start := max(0, from-len(s)+1)
		k := strings.Index(text[start:], s)
		if k < 0 {
			continue
		}
		at := start + k
		if r.ListOrder {
			return s, at, true
		}
		if end := at + len(s); bestAt < 0 || end < bestEnd {
			best, bestAt, bestEnd = s, at, end
		}
	}
	return best, bestAt, bestAt >= 0
}

// IsEOS reports whether token i is the end-of-turn token (no text).
func (o Output) IsEOS(i int) bool {
	return o.Finish == FinishStop && o.StopStr == "" && !o.HasStopToken && i == o.Tokens-1
}

// TokenText is the text of generated token i: "" for the end-of-turn token,
// and only the part before Cut once a stop string or stop token ended the
// output.
func (o Output) TokenText(i int) string {
	if o.IsEOS(i) {
		return ""
	}
	if !o.Trim {
		return tokenize.TokenText(i)
	}
	start := 0
	for j := range i {
		start += len(tokenize.TokenText(j))
	}
	t := tokenize.TokenText(i)
	switch {
	case start >= o.Cut:
		return ""
	case start+len(t) > o.Cut:
		return t[:o.Cut-start]
	}
	return t
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
