package prefixcache

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	lru "github.com/hashicorp/golang-lru/v2"

	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
	"github.com/gpustack/routing-conformance/sim/llmd/zaplog"
)

// ApproxType is the approximate producer's plugin type.
const ApproxType = "approx-prefix-cache-producer"

// Defaults and limits (approximateprefix/{types,plugin}.go).
const (
	DefaultBlockSizeTokens      = 16
	MinBlockSizeTokens          = 64
	DefaultMaxPrefixBlocks      = 2048
	DefaultMaxPrefixTokens      = 131072
	DefaultLRUCapacityPerServer = 31250
	prefillProfile              = "prefill"
	podActiveCheckInterval      = 2 * time.Minute
	averageCharactersPerToken   = 4
)

// ApproxConfig is the producer's parameters with their defaults.
type ApproxConfig struct {
	AutoTune               bool `json:"autoTune"`
	BlockSizeTokens        int  `json:"blockSizeTokens"`
	BlockSize              int  `json:"blockSize"`
	MaxPrefixBlocksToMatch int  `json:"maxPrefixBlocksToMatch"`
	MaxPrefixTokensToMatch int  `json:"maxPrefixTokensToMatch"`
	LRUCapacityPerServer   int  `json:"lruCapacityPerServer"`
}

// DefaultApproxConfig is defaultConfig.
func DefaultApproxConfig() ApproxConfig {
	return ApproxConfig{AutoTune: true, BlockSizeTokens: DefaultBlockSizeTokens, MaxPrefixBlocksToMatch: DefaultMaxPrefixBlocks,
		MaxPrefixTokensToMatch: DefaultMaxPrefixTokens, LRUCapacityPerServer: DefaultLRUCapacityPerServer}
}

// Metrics is where the producer reports (eppmetrics.Registry satisfies it).
type Metrics interface {
	RegisterPrefixIndexer()
	PrefixIndexerSize(pluginName, pluginType string, n int64)
	PrefixMatch(pluginName, pluginType string, matchedBytes, totalBytes int)
}

// Approx is approx-prefix-cache-producer: it hashes the request's tokens
// into blocks, finds for every candidate the longest run of leading blocks
// it remembers routing to that endpoint, and after scheduling remembers the
// chosen endpoint (and the P/D prefill endpoint) for those blocks, in a
// per-endpoint LRU. No engine feedback.
type Approx struct {
	name    string
	cfg     ApproxConfig
	idx     *indexer
	metrics Metrics
	key     fw.DataKey

	mu    sync.Mutex
	state map[string][][]uint64
}

// NewApprox is ApproxPrefixCacheFactory (log lines included).
func NewApprox(ctx context.Context, name string, dec *json.Decoder, log zaplog.Logger, m Metrics) (*Approx, error) {
	cfg := DefaultApproxConfig()
	if dec != nil {
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("failed to unmarshal prefix cache parameters: %w", err)
		}
	}
	if cfg.BlockSize > 0 {
		log.V(zaplog.Default).Info("approximateprefix/plugin.go:391", "'blockSize' is deprecated; use 'blockSizeTokens' instead", "blockSize", cfg.BlockSize)
		if cfg.BlockSizeTokens == DefaultBlockSizeTokens {
			cfg.BlockSizeTokens = cfg.BlockSize
		}
		cfg.BlockSize = 0
	}
	log.V(zaplog.Default).Info("approximateprefix/plugin.go:140", "Prefix DataProducer initialized", "config", cfg)
	if !cfg.AutoTune && cfg.BlockSizeTokens <= 0 {
		return nil, fmt.Errorf("invalid configuration: BlockSizeTokens must be > 0 when AutoTune is disabled (current value: %d)", cfg.BlockSizeTokens)
	}
	if cfg.MaxPrefixTokensToMatch < 0 {
		return nil, fmt.Errorf("invalid configuration: MaxPrefixTokensToMatch must be >= 0 (current value: %d)", cfg.MaxPrefixTokensToMatch)
	}
	m.RegisterPrefixIndexer()
	if cfg.BlockSizeTokens > 0 && cfg.BlockSizeTokens < MinBlockSizeTokens {
		log.Info("approximateprefix/plugin.go:163", "WARNING: configured blockSizeTokens is below the recommended minimum, overriding it.",
			"blockSizeTokens", cfg.BlockSizeTokens, "minimum", MinBlockSizeTokens,
			"issue", "https://github.com/llm-d/llm-d-router/issues/1158")
	}
	a := &Approx{name: name, cfg: cfg, idx: newIndexer(cfg.LRUCapacityPerServer), metrics: m,
		key: fw.PrefixCacheMatchInfoKey.WithNonEmptyProducerName(name), state: map[string][][]uint64{}}
	return a, nil
}

// TypedName implements fw.Plugin.
func (a *Approx) TypedName() fw.TypedName { return fw.TypedName{Type: ApproxType, Name: a.name} }

// Produces implements fw.Producer.
func (a *Approx) Produces() []fw.DataKey { return []fw.DataKey{a.key} }

// Consumes implements fw.Consumer: the tokenized prompt.
func (a *Approx) Consumes() []fw.DataKey { return []fw.DataKey{fw.TokenizedPromptKey} }

// Run reports the indexer size every second and drops endpoints that left
// the pool every two minutes (reportLRUSize, CleanUpInactivePods).
func (a *Approx) Run(ctx context.Context, active func() map[string]bool) {
	go fw.Every(ctx, time.Second, func() {
		a.metrics.PrefixIndexerSize(a.name, ApproxType, int64(a.idx.entries()))
	})
	fw.Every(ctx, podActiveCheckInterval, func() {
		keep := active()
		for _, pod := range a.idx.pods() {
			if !keep[pod] {
				a.idx.removePod(pod)
			}
		}
	})
}

// BlockSize is GetBlockSize: the configured size, or with autoTune the
// first candidate's reported engine block size, never below 64.
func (a *Approx) BlockSize(eps []*fw.Endpoint) int {
	bs := a.cfg.BlockSizeTokens
	if a.cfg.AutoTune && len(eps) > 0 && eps[0].Metrics.CacheBlockSize > 0 {
		bs = eps[0].Metrics.CacheBlockSize
	}
	return max(bs, MinBlockSizeTokens)
}

// maxBlocks is resolveMaxBlocks.
func (a *Approx) maxBlocks(blockSize int) int {
	if a.cfg.MaxPrefixTokensToMatch > 0 && blockSize > 0 {
		return a.cfg.MaxPrefixTokensToMatch / blockSize
	}
	if a.cfg.MaxPrefixBlocksToMatch == 0 {
		return math.MaxInt
	}
	return a.cfg.MaxPrefixBlocksToMatch
}

// Produce implements fw.Producer.
func (a *Approx) Produce(_ context.Context, req *fw.Request, eps []*fw.Endpoint) error {
	bs := a.BlockSize(eps)
	perPrompt := BlockHashes(req, bs, a.maxBlocks(bs))
	matched := map[string]int{}
	total := 0
	for _, hashes := range perPrompt {
		for pod, n := range a.idx.longestPrefix(hashes) {
			matched[pod] += n
		}
		total += len(hashes)
	}
	for _, e := range eps {
		e.Put(a.key.String(), fw.NewPrefixCacheMatchInfo(matched[e.Meta.ID()], total, bs))
	}
	a.mu.Lock()
	a.state[req.RequestID] = perPrompt
	a.mu.Unlock()
	return nil
}

// PreRequest implements fw.PreRequest: remember the primary target and the
// prefill target (profile "prefill") for the request's blocks.
func (a *Approx) PreRequest(_ context.Context, req *fw.Request, res *fw.SchedulingResult) error {
	a.mu.Lock()
	perPrompt, ok := a.state[req.RequestID]
	delete(a.state, req.RequestID)
	a.mu.Unlock()
	primary := res.ProfileResults[res.PrimaryProfileName]
	if primary == nil || len(primary.TargetEndpoints) == 0 || !ok {
		return nil
	}
	target := primary.TargetEndpoints[0]
	servers := []*fw.Endpoint{target}
	if pr := res.ProfileResults[prefillProfile]; pr != nil && len(pr.TargetEndpoints) > 0 {
		servers = append(servers, pr.TargetEndpoints[0])
	}
	// The source updates the indexer in a goroutine; the sim applies it
	// before the request is sent, which only differs under sub-millisecond
	// races between two requests of one prompt.
	for _, s := range servers {
		for _, hashes := range perPrompt {
			a.idx.add(hashes, s.Meta.ID(), a.capacity(s))
		}
	}
	total := 0
	for _, hashes := range perPrompt {
		total += len(hashes)
	}
	matchLen := 0
	if raw, ok := target.Get(a.key.String()); ok {
		matchLen = raw.(*fw.PrefixCacheMatchInfo).MatchBlocks
	}
	bs := a.BlockSize(primary.TargetEndpoints)
	a.metrics.PrefixMatch(a.name, ApproxType, matchLen*bs*averageCharactersPerToken, total*bs*averageCharactersPerToken)
	return nil
}

// capacity is makeserver: the engine's GPU block count with autoTune, else
// lruCapacityPerServer.
func (a *Approx) capacity(e *fw.Endpoint) int {
	if a.cfg.AutoTune && e.Metrics.CacheNumBlocks > 0 {
		return e.Metrics.CacheNumBlocks
	}
	if a.cfg.LRUCapacityPerServer > 0 {
		return a.cfg.LRUCapacityPerServer
	}
	return DefaultLRUCapacityPerServer
}

// Entries is the number of (endpoint, block) entries the indexer holds.
func (a *Approx) Entries() int { return a.idx.entries() }

// BlockHashes is prefixhash.GetBlockHashes: each prompt's tokens cut into
// blocks of blockSize (the last block may be short), each block hashed with
// xxhash over its little-endian token bytes and chained with the previous
// block's hash, the chain seeded with the target model's name; at most
// maxBlocks per prompt.
func BlockHashes(req *fw.Request, blockSize, maxBlocks int) [][]uint64 {
	if req == nil || req.Body == nil || req.Body.Tokens.TokenCount() == 0 || blockSize <= 0 {
		return nil
	}
	var out [][]uint64
	for _, tokens := range req.Body.Tokens.PerPromptTokens {
		var hashes []uint64
		prev := xxhash.Sum64String(req.TargetModel)
		buf := make([]byte, 0, blockSize*4)
		var pair [16]byte
		for i := 0; i < len(tokens) && len(hashes) < maxBlocks; i += blockSize {
			end := min(i+blockSize, len(tokens))
			buf = buf[:0]
			for _, t := range tokens[i:end] {
				buf = binary.LittleEndian.AppendUint32(buf, t)
			}
			binary.LittleEndian.PutUint64(pair[:8], xxhash.Sum64(buf))
			binary.LittleEndian.PutUint64(pair[8:], prev)
			prev = xxhash.Sum64(pair[:])
			hashes = append(hashes, prev)
		}
		if len(hashes) > 0 {
			out = append(out, hashes)
		}
	}
	return out
}

// indexer is the approximate producer's indexer: hash → endpoints, and one
// LRU of hashes per endpoint whose eviction removes the endpoint from the
// hash's set (approximateprefix/indexer.go).
type indexer struct {
	mu         sync.RWMutex
	hashToPods map[uint64]map[string]struct{}
	podToLRU   map[string]*lru.Cache[uint64, struct{}]
	defaultCap int
}

func newIndexer(defaultCap int) *indexer {
	return &indexer{hashToPods: map[uint64]map[string]struct{}{}, podToLRU: map[string]*lru.Cache[uint64, struct{}]{}, defaultCap: defaultCap}
}

// add records hashes for pod; the pod's LRU is sized on its first add.
func (i *indexer) add(hashes []uint64, pod string, capacity int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	c, ok := i.podToLRU[pod]
	if !ok {
		if capacity <= 0 {
			capacity = i.defaultCap
		}
		c, _ = lru.NewWithEvict(capacity, func(h uint64, _ struct{}) {
			if set, ok := i.hashToPods[h]; ok {
				delete(set, pod)
				if len(set) == 0 {
					delete(i.hashToPods, h)
				}
			}
		})
		i.podToLRU[pod] = c
	}
	for _, h := range hashes {
		c.Add(h, struct{}{})
	}
	for _, h := range hashes {
		set := i.hashToPods[h]
		if set == nil {
			set = map[string]struct{}{}
			i.hashToPods[h] = set
		}
		set[pod] = struct{}{}
	}
}

// longestPrefix is matchLongestPrefix: walk the blocks from the first and
// stop at the first block no endpoint holds; count per endpoint.
func (i *indexer) longestPrefix(hashes []uint64) map[string]int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := map[string]int{}
	for _, h := range hashes {
		set := i.hashToPods[h]
		if len(set) == 0 {
			break
		}
		for pod := range set {
			out[pod]++
		}
	}
	return out
}

func (i *indexer) removePod(pod string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	c, ok := i.podToLRU[pod]
	if !ok {
		return
	}
	for _, h := range c.Keys() {
		c.Remove(h)
	}
	delete(i.podToLRU, pod)
}

func (i *indexer) pods() []string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]string, 0, len(i.podToLRU))
	for p := range i.podToLRU {
		out = append(out, p)
	}
	return out
}

func (i *indexer) entries() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	n := 0
	for _, c := range i.podToLRU {
		n += c.Len()
	}
	return n
}
