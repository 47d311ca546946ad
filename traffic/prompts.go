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

// question is the part of prompt i that no other request shares.
func question(nonce string, i int) string {
	_, rng := seed(nonce, "question", i)
	return "\nQuestion " + strconv.Itoa(i) + " of run " + nonce + ": in one sentence, how does the " +
		vocabulary[rng.IntN(len(vocabulary))] + " relate to the " + vocabulary[rng.IntN(len(vocabulary))] + "?"
}

// prompter builds the prompts of one resolved plan, caching shared prefixes.
type prompter struct {
	set      PromptSet
	prefixes []string
}

func newPrompter(set PromptSet) *prompter {
	p := &prompter{set: set}
	if set.Kind != PromptsUnrelated {
		p.prefixes = make([]string, set.Groups)
		for g := range p.prefixes {
			p.prefixes[g] = leadingText(set.Nonce, "prefix", g, set.PrefixChars)
		}
	}
	return p
}

// prompt returns the text and group of request i. For PromptsUnrelated the
// group is i itself: every request is its own group.
func (p *prompter) prompt(i int) (string, int) {
	if p.set.Kind == PromptsUnrelated {
		return leadingText(p.set.Nonce, "unrelated", i, p.set.PrefixChars) + question(p.set.Nonce, i), i
	}
	g := i % len(p.prefixes)
	return p.prefixes[g] + question(p.set.Nonce, i), g
}

// Prompt returns the prompt text request i of the plan sends and its group
// (the index of its prefix; for PromptsUnrelated, i). Call it on Report.Plan,
// which carries the nonce the run used; on a plan with an empty nonce it
// uses the empty nonce. It fails only when plan.Prompts is invalid.
func (p Plan) Prompt(i int) (text string, group int, err error) {
	set := p.withDefaults().Prompts
	if err := set.validate(); err != nil {
		return "", 0, err
	}
	text, group = newPrompter(set).prompt(i)
	return text, group, nil
}
