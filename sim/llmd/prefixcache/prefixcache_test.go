package prefixcache_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/llmd/eppconfig"
	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/prefixcache"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
)

func dec(s string) *json.Decoder { return eppconfig.StrictDecoder(json.RawMessage(s)) }

func chatReq(id, text string) *fw.Request {
	return &fw.Request{RequestID: id, TargetModel: "m", Body: &fw.RequestBody{Chat: &fw.ChatRequest{
		Messages: []fw.ChatMessage{{Role: "user", Raw: text}}}}}
}

func tokenize(t *testing.T, r *fw.Request) {
	t.Helper()
	tp, err := prefixcache.NewTokenProducer("token-producer", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Produce(context.Background(), r, nil); err != nil {
		t.Fatal(err)
	}
}

func TestEstimateBackendPacksRoleAndContentFourBytesPerToken(t *testing.T) {
	r := chatReq("1", "hello")
	tokenize(t, r)
	// "user"+"hello" = 9 bytes → 3 little-endian uint32 pseudo-tokens, zero padded.
	got := r.Body.Tokens.PerPromptTokens[0]
	want := []uint32{0x72657375, 0x6c6c6568, 0x0000006f}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("pseudo-tokens %#x", got)
	}
	c := &fw.Request{Body: &fw.RequestBody{Completion: &fw.CompletionRequest{TokenIDs: []uint32{5, 6}}}}
	tokenize(t, c)
	if c.Body.Tokens.TokenCount() != 2 {
		t.Fatal("pre-tokenized completions pass through")
	}
}

func newApprox(t *testing.T, params string) (*prefixcache.Approx, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	var d *json.Decoder
	if params != "" {
		d = dec(params)
	}
	a, err := prefixcache.NewApprox(context.Background(), "approx-prefix-cache-producer", d, zaplog.NewSink(&logs, 2).Logger(), eppmetrics.New())
	if err != nil {
		t.Fatal(err)
	}
	return a, &logs
}

func eps(names ...string) []*fw.Endpoint {
	var out []*fw.Endpoint
	for _, n := range names {
		out = append(out, fw.NewEndpoint(&fw.EndpointMetadata{Namespace: "ns", Name: n + "-rank-0", PodName: n}, fw.Metrics{}))
	}
	return out
}

func TestBlockSizeIsClampedToTheMinimumOf64(t *testing.T) {
	a, logs := newApprox(t, "")
	if got := a.BlockSize(eps("a")); got != 64 {
		t.Fatalf("default 16 clamps to 64 at request time, got %d", got)
	}
	if !strings.Contains(logs.String(), `"msg":"WARNING: configured blockSizeTokens is below the recommended minimum, overriding it.","blockSizeTokens":16,"minimum":64`) {
		t.Fatalf("startup warning missing:\n%s", logs.String())
	}
	tuned := eps("a")
	tuned[0].Metrics.CacheBlockSize = 128
	if got := a.BlockSize(tuned); got != 128 {
		t.Fatalf("autoTune takes the first candidate's engine block size: %d", got)
	}
	tuned[0].Metrics.CacheBlockSize = 16
	if got := a.BlockSize(tuned); got != 64 {
		t.Fatalf("a tuned 16 still clamps to 64: %d", got)
	}
	fixed, _ := newApprox(t, `{"autoTune":false,"blockSizeTokens":256}`)
	tuned[0].Metrics.CacheBlockSize = 128
	if got := fixed.BlockSize(tuned); got != 256 {
		t.Fatalf("without autoTune the configured size: %d", got)
	}
}

func TestBlockHashesIncludeTheShortLastBlockAndChain(t *testing.T) {
	r := &fw.Request{TargetModel: "m", Body: &fw.RequestBody{Tokens: &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{make([]uint32, 130)}}}}
	h := prefixcache.BlockHashes(r, 64, 2048)
	if len(h) != 1 || len(h[0]) != 3 {
		t.Fatalf("130 tokens / 64 → 2 full + 1 short block: %v", h)
	}
	r2 := &fw.Request{TargetModel: "m", Body: &fw.RequestBody{Tokens: &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{append(make([]uint32, 64), 1)}}}}
	h2 := prefixcache.BlockHashes(r2, 64, 2048)
	if h2[0][0] != h[0][0] || h2[0][1] == h[0][1] {
		t.Fatal("equal first blocks hash equal; differing second blocks differ")
	}
	other := &fw.Request{TargetModel: "n", Body: r.Body}
	if prefixcache.BlockHashes(other, 64, 2048)[0][0] == h[0][0] {
		t.Fatal("the chain is seeded with the model name")
	}
	if got := prefixcache.BlockHashes(r, 64, 2); len(got[0]) != 2 {
		t.Fatal("maxBlocks caps the hashed blocks")
	}
}

func schedule(t *testing.T, a *prefixcache.Approx, r *fw.Request, cands []*fw.Endpoint, pick int) map[string]*fw.PrefixCacheMatchInfo {
	t.Helper()
	if err := a.Produce(context.Background(), r, cands); err != nil {
		t.Fatal(err)
	}
	info := map[string]*fw.PrefixCacheMatchInfo{}
	for _, e := range cands {
		v, _ := e.Get(fw.PrefixCacheMatchInfoKey.String())
		info[e.Meta.PodName] = v.(*fw.PrefixCacheMatchInfo)
	}
	res := &fw.SchedulingResult{PrimaryProfileName: "p", ProfileResults: map[string]*fw.ProfileResult{"p": {TargetEndpoints: []*fw.Endpoint{cands[pick]}}}}
	if err := a.PreRequest(context.Background(), r, res); err != nil {
		t.Fatal(err)
	}
	return info
}

func TestApproxProducerRemembersWhereAPrefixWent(t *testing.T) {
	a, _ := newApprox(t, "")
	prefix := strings.Repeat("x", 600)
	r1 := chatReq("1", prefix+"first")
	tokenize(t, r1)
	info := schedule(t, a, r1, eps("a", "b"), 1)
	if info["a"].MatchBlocks != 0 || info["b"].MatchBlocks != 0 || info["a"].TotalBlocks != 3 || info["a"].BlockSizeTokens != 64 {
		t.Fatalf("cold index: %v %v", info["a"], info["b"])
	}
	r2 := chatReq("2", prefix+"second")
	tokenize(t, r2)
	info = schedule(t, a, r2, eps("a", "b"), 1)
	// "user"+600 bytes share the first two 256-byte blocks.
	if info["b"].MatchBlocks != 2 || info["a"].MatchBlocks != 0 {
		t.Fatalf("b served the prefix: a=%v b=%v", info["a"], info["b"])
	}
}

func TestLRUCapacityPerEndpointEvictsOldBlocks(t *testing.T) {
	a, _ := newApprox(t, `{"lruCapacityPerServer":2,"autoTune":false}`)
	r1 := chatReq("1", strings.Repeat("a", 1000)) // 4 blocks h1..h4
	tokenize(t, r1)
	schedule(t, a, r1, eps("a"), 0)
	if a.Entries() != 2 {
		t.Fatalf("a 2-entry LRU keeps 2 of 4 blocks, has %d", a.Entries())
	}
	// indexer.Add fills the LRU before the hash→endpoint map, so h1 and h2,
	// evicted inside that same Add, stay in the map; a later Add's
	// evictions (h3, h4 here) do leave it.
	r3 := chatReq("3", strings.Repeat("z", 300)) // 2 other blocks
	tokenize(t, r3)
	schedule(t, a, r3, eps("a"), 0)
	r2 := chatReq("2", strings.Repeat("a", 1000))
	tokenize(t, r2)
	if info := schedule(t, a, r2, eps("a"), 0); info["a"].MatchBlocks != 2 {
		t.Fatalf("h3 was evicted by the later add: the leading run stops at 2, got %v", info["a"])
	}
	tuned, _ := newApprox(t, "")
	big := eps("a")
	big[0].Metrics.CacheNumBlocks = 3
	r4 := chatReq("4", strings.Repeat("b", 2000))
	tokenize(t, r4)
	schedule(t, tuned, r4, big, 0)
	if tuned.Entries() != 3 {
		t.Fatalf("autoTune sizes the LRU by the engine's GPU block count: %d", tuned.Entries())
	}
}

func TestPreciseIndexScoresTheLongestLeadingRunFromKVEvents(t *testing.T) {
	p, err := prefixcache.NewPrecise("precise-prefix-cache-producer", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]uint32, 40) // 2 full blocks of 16; the 8-token tail is not a block
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	cands := []*fw.Endpoint{
		fw.NewEndpoint(&fw.EndpointMetadata{Name: "a", Address: "10.0.0.1", Port: "8000"}, fw.Metrics{}),
		fw.NewEndpoint(&fw.EndpointMetadata{Name: "b", Address: "10.0.0.2", Port: "8000"}, fw.Metrics{}),
	}
	p.Apply("10.0.0.1:8000", prefixcache.KVEvent{Kind: prefixcache.BlockStored, BlockHashes: []uint64{1}, TokenIDs: tokens[:16], BlockSize: 16})
	parent := uint64(1)
	p.Apply("10.0.0.1:8000", prefixcache.KVEvent{Kind: prefixcache.BlockStored, BlockHashes: []uint64{2}, ParentBlockHash: &parent, TokenIDs: tokens[16:32], BlockSize: 16})
	p.Apply("10.0.0.2:8000", prefixcache.KVEvent{Kind: prefixcache.BlockStored, BlockHashes: []uint64{9}, TokenIDs: tokens[:16], BlockSize: 16})
	r := &fw.Request{Body: &fw.RequestBody{Tokens: &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{tokens}}}}
	read := func() (int, int) {
		if err := p.Produce(context.Background(), r, cands); err != nil {
			t.Fatal(err)
		}
		key := "PrefixCacheMatchInfoDataKey/precise-prefix-cache-producer"
		va, _ := cands[0].Get(key)
		vb, _ := cands[1].Get(key)
		ia, ib := va.(*fw.PrefixCacheMatchInfo), vb.(*fw.PrefixCacheMatchInfo)
		if ia.TotalBlocks != 2 || ia.BlockSizeTokens != 16 {
			t.Fatalf("total %d block %d", ia.TotalBlocks, ia.BlockSizeTokens)
		}
		return ia.MatchBlocks, ib.MatchBlocks
	}
	if a, b := read(); a != 2 || b != 1 {
		t.Fatalf("a holds both blocks, b the first: %d %d", a, b)
	}
	p.Apply("10.0.0.1:8000", prefixcache.KVEvent{Kind: prefixcache.BlockRemoved, BlockHashes: []uint64{1}})
	if a, _ := read(); a != 0 {
		t.Fatalf("with its first block evicted a's leading run is 0: %d", a)
	}
	p.Apply("10.0.0.2:8000", prefixcache.KVEvent{Kind: prefixcache.AllBlocksCleared})
	if _, b := read(); b != 0 {
		t.Fatalf("cleared: %d", b)
	}
}

// The block keys start from the model name: events under the operator's
// topic "kv@" (no pod, no model) index keys no request of a named model
// ever looks up, so every candidate scores 0; the same events under
// "kv@<pod>@<model>" match (kvblock/token_processor.go getInitHash,
// engineadapter/common.go parseTopic).
func TestPreciseKeysIncludeTheModelFromTheEventTopic(t *testing.T) {
	tokens := make([]uint32, 32)
	for i := range tokens {
		tokens[i] = uint32(100 + i)
	}
	match := func(topic string) int {
		p, err := prefixcache.NewPrecise("precise-prefix-cache-producer", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Apply("10.0.0.1:8000", prefixcache.KVEvent{Topic: topic, Kind: prefixcache.BlockStored, BlockHashes: []uint64{1, 2}, TokenIDs: tokens, BlockSize: 16})
		cand := []*fw.Endpoint{fw.NewEndpoint(&fw.EndpointMetadata{Name: "a", Address: "10.0.0.1", Port: "8000"}, fw.Metrics{})}
		r := &fw.Request{TargetModel: "Qwen/Qwen2.5-0.5B-Instruct", Body: &fw.RequestBody{Tokens: &fw.TokenizedPrompt{PerPromptTokens: [][]uint32{tokens}}}}
		if err := p.Produce(context.Background(), r, cand); err != nil {
			t.Fatal(err)
		}
		v, _ := cand[0].Get("PrefixCacheMatchInfoDataKey/precise-prefix-cache-producer")
		return v.(*fw.PrefixCacheMatchInfo).MatchBlocks
	}
	if got := match("kv@"); got != 0 {
		t.Errorf("topic kv@: %d blocks matched, want 0 (the events carry no model)", got)
	}
	if got := match("kv@10.0.0.1@Qwen/Qwen2.5-0.5B-Instruct"); got != 2 {
		t.Errorf("topic with the model: %d blocks matched, want 2", got)
	}
	if got := match("kv@10.0.0.1@other-model"); got != 0 {
		t.Errorf("topic naming another model: %d blocks matched, want 0", got)
	}
	for topic, want := range map[string]string{"kv@": "", "kv@1.2.3.4@m": "m", "kv@a@b@c": "", "": ""} {
		if got := prefixcache.TopicModel(topic); got != want {
			t.Errorf("TopicModel(%q) = %q, want %q", topic, got, want)
		}
	}
}
