// Package tokenize is the engines' deterministic stand-in for a real
// tokenizer and chat template.
//
// It is not a BPE tokenizer. What the sim needs from a tokenizer is that
// token counts are plausible (about 4 characters per token, like English text
// under Qwen's or Llama's vocabularies) and that a shared text prefix becomes a
// shared token prefix, so prefix caches (vLLM's block hashes, SGLang's radix
// tree) hit exactly where a real one would. The rules:
//
//   - The special tokens <|im_start|>, <|im_end|> and <|endoftext|> are one
//     token each, with Qwen2's ids (151644, 151645, 151643).
//   - Every other run of text is cut into fixed 4-byte pieces from its start;
//     a shorter last piece is a token too. A piece's id is a hash of its bytes
//     folded into Qwen2's ordinary vocabulary (0..151642).
//
// So two texts that share their first S bytes share their first floor(S/4)
// tokens (counted from the last special token before the fork), and the
// template's fixed head is always a shared prefix.
package tokenize

import (
	"strings"
	"sync"
)

// Qwen2 vocabulary facts the ids are folded into.
const (
	// VocabSize is the number of ordinary (non-special) token ids.
	VocabSize = 151643
	// EndOfText is <|endoftext|>.
	EndOfText uint32 = 151643
	// IMStart is <|im_start|>.
	IMStart uint32 = 151644
	// IMEnd is <|im_end|>, the end-of-turn token a chat model stops on.
	IMEnd uint32 = 151645
)

// BytesPerToken is how many bytes of ordinary text make one token.
const BytesPerToken = 4

var specials = [...]struct {
	text string
	id   uint32
}{
	{"<|im_start|>", IMStart},
	{"<|im_end|>", IMEnd},
	{"<|endoftext|>", EndOfText},
}

// Encode appends the token ids of text to dst and returns it.
func Encode(dst []uint32, text string) []uint32 {
	for len(text) > 0 {
		i := strings.Index(text, "<|")
		if i < 0 {
			return appendPieces(dst, text)
		}
		dst = appendPieces(dst, text[:i])
		text = text[i:]
		matched := false
		for _, s := range specials {
			if strings.HasPrefix(text, s.text) {
				dst = append(dst, s.id)
				text = text[len(s.text):]
				matched = true
				break
			}
		}
		if !matched {
			// "<|" that opens no special token is ordinary text: cut the
			// pieces up to the next "<|" so the run stays prefix-stable.
			j := strings.Index(text[2:], "<|")
			if j < 0 {
				return appendPieces(dst, text)
			}
			dst = appendPieces(dst, text[:j+2])
			text = text[j+2:]
		}
	}
	return dst
}

// Count returns how many tokens Encode produces for text.
func Count(text string) int {
	p := GetIDs()
	n := len(Encode(*p, text))
	PutIDs(p)
	return n
}

func appendPieces(dst []uint32, s string) []uint32 {
	for len(s) > 0 {
		n := min(BytesPerToken, len(s))
		dst = append(dst, pieceID(s[:n]))
		s = s[n:]
	}
	return dst
}

// pieceID is FNV-1a over the piece, folded into the ordinary vocabulary.
func pieceID(p string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(p); i++ {
		h ^= uint32(p[i])
		h *= 16777619
	}
	return h % VocabSize
}

// TokenText is the text of one generated filler token: the engines emit these
// words as model output. Each is at most BytesPerToken bytes so one word is
// one token.
func TokenText(i int) string { return fillers[i%len(fillers)] }

// TokenID is the id of TokenText(i).
func TokenID(i int) uint32 { return pieceID(TokenText(i)) }

// fillers is a fixed list of short English words (with their leading space,
// as BPE vocabularies store them).
var fillers = [...]string{
	" The", " sky", " is", " a", " map", " of", " old", " and",
	" new", " way", " to", " see", " how", " we", " go", " far",
	" it", " can", " be", " so", " ok", " for", " all", " day",
	" on", " end", " at", " one", " two", " set", " run", " now",
}

var idsPool = sync.Pool{New: func() any { s := make([]uint32, 0, 512); return &s }}

// GetIDs returns an empty pooled token-id buffer (a prompt, or a prompt and
// its output on the way into a prefix cache); give it back with PutIDs.
func GetIDs() *[]uint32 {
	p := idsPool.Get().(*[]uint32)
	*p = (*p)[:0]
	return p
}

// PutIDs returns a buffer from GetIDs to the pool.
func PutIDs(p *[]uint32) { idsPool.Put(p) }
