package traffic

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"strconv"
	"strings"
)

// vocabulary gives prompts word-like text, so that real tokenizers see
// ordinary tokens rather than one long hex run.
var vocabulary = strings.Fields(`
	river mountain engine lantern harbor meadow orbit copper signal garden
	thunder window marble forest bridge canvas silver rocket island pepper
	violet shadow summer winter autumn spring candle planet ladder mirror
	feather compass anchor basket castle dragon falcon glacier hammer jacket
	kettle lemon magnet needle oyster pillow quartz saddle tunnel umbrella
	velvet walnut yogurt zephyr cobalt ember fjord granite harvest ivory`)

// seedLen is the number of hex characters that start every prefix.
const seedLen = 16

// newNonce returns 16 random hex characters.
func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux; a zero nonce would still be valid
	return hex.EncodeToString(b[:])
}

// seed derives the text that starts a prefix from the run's nonce, so that
// prefixes of different runs and of different groups differ from their first
// characters on.
func seed(nonce, kind string, n int) (string, *mrand.Rand) {
	sum := sha256.Sum256([]byte(nonce + "/" + kind + "/" + strconv.Itoa(n)))
	rng := mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(sum[0:8]), binary.LittleEndian.Uint64(sum[8:16])))
	return hex.EncodeToString(sum[16:24]), rng
}

// leadingText returns exactly chars characters: the seed, then words.
func leadingText(nonce, kind string, n, chars int) string {
	s, rng := seed(nonce, kind, n)
	var b strings.Builder
	b.Grow(chars + 16)
	b.WriteString(s)
	for b.Len() < chars {
		b.WriteByte(' ')
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()[:chars]
}

// nonceHash seeds the per-request word choice of questions.
func nonceHash(nonce string) uint64 {
	sum := sha256.Sum256([]byte(nonce))
	return binary.LittleEndian.Uint64(sum[:8])
}

// writeQuestion writes the part of prompt i that no other request shares:
// the index and the run's nonce make it unique; two words picked by a hash of
// both vary its wording.
func writeQuestion(b *strings.Builder, nonce string, h uint64, i int) {
	x := splitmix64(h ^ uint64(i))
	n := uint64(len(vocabulary))
	b.WriteString("\nQuestion ")
	b.WriteString(strconv.Itoa(i))
	b.WriteString(" of run ")
	b.WriteString(nonce)
	b.WriteString(": in one sentence, how does the ")
	b.WriteString(vocabulary[x%n])
	b.WriteString(" relate to the ")
	b.WriteString(vocabulary[(x>>32)%n])
	b.WriteString("?")
}

// splitmix64 is a cheap, well-mixed hash step (Steele et al.).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// questionRoom is enough for the fixed words of a question.
const questionRoom = 96

// prompter builds the prompts of one resolved plan, caching shared prefixes.
type prompter struct {
	set       PromptSet
	prefixes  []string
	nonceHash uint64
}

func newPrompter(set PromptSet) *prompter {
	p := &prompter{set: set, nonceHash: nonceHash(set.Nonce)}
	if set.Kind != PromptsUnrelated {
		p.prefixes = make([]string, set.Groups)
		for g := range p.prefixes {
			p.prefixes[g] = leadingText(set.Nonce, "prefix", g, set.PrefixChars)
		}
	}
	return p
}

// group is request i's prefix group. For PromptsUnrelated it is i itself:
// every request is its own group.
func (p *prompter) group(i int) int {
	if p.set.Kind == PromptsUnrelated {
		return i
	}
	return i % len(p.prefixes)
}

// prompt returns the text and group of request i.
func (p *prompter) prompt(i int) (string, int) {
	g := p.group(i)
	var lead string
	if p.set.Kind == PromptsUnrelated {
		lead = leadingText(p.set.Nonce, "unrelated", i, p.set.PrefixChars)
	} else {
		lead = p.prefixes[g]
	}
	var b strings.Builder
	b.Grow(len(lead) + len(p.set.Nonce) + questionRoom)
	b.WriteString(lead)
	writeQuestion(&b, p.set.Nonce, p.nonceHash, i)
	return b.String(), g
}

// Prompt returns the prompt text request i of the plan sends and its group
// (the index of its prefix; for PromptsUnrelated, the prompt's number
// FirstIndex+i). Call it on Report.Plan,
// which carries the nonce the run used; on a plan with an empty nonce it
// uses the empty nonce. It fails only when plan.Prompts is invalid.
func (p Plan) Prompt(i int) (text string, group int, err error) {
	set := p.withDefaults().Prompts
	if err := set.validate(); err != nil {
		return "", 0, err
	}
	text, group = newPrompter(set).prompt(p.FirstIndex + i)
	return text, group, nil
}
