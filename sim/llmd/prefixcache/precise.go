package prefixcache

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/labels"

	fw "github.com/gpustack/routing-conformance/sim/llmd/framework"
)

// PreciseType is the precise producer's plugin type.
const PreciseType = "precise-prefix-cache-producer"

// KVEventKind is a vLLM KV-cache event type.
type KVEventKind int

// The event kinds vLLM publishes on its KV-events socket (topic "kv@"), and
// Reset: the subscriber dropping what the source reported (Pool.resetForSource
// in llm-d/llm-d-router@71f4f099:pkg/kvevents/pool.go, on a failed replay or a
// sequence reset).
const (
	BlockStored KVEventKind = iota
	BlockRemoved
	AllBlocksCleared
	Reset
)

// KVEvent is one engine KV-cache event. BlockStored carries the engine's
// hashes for the new full blocks, the parent block's hash (nil for the
// first block of a sequence) and the blocks' token IDs; BlockRemoved the
// evicted hashes.
type KVEvent struct {
	// Topic is the ZMQ topic frame the event arrived under. vLLM sends its
	// KVEventsConfig.topic verbatim; the producer reads "kv@<pod>@<model>"
	// and takes the model for the block keys (any other shape: no model).
	Topic           string
	Kind            KVEventKind
	BlockHashes     []uint64
	ParentBlockHash *uint64
	TokenIDs        []uint32
	BlockSize       int
	// LoraName, when set, replaces the topic's model in the keys.
	LoraName *string
	// GroupIdx and SpecKind are vLLM's KV-cache group and its spec kind
	// (nil and "" from engines without them).
	GroupIdx *int
	SpecKind string
}

// Subscriber identifies the engine whose events a subscription carries.
type Subscriber struct {
	Namespace, Pod string
	// Address is the engine Pod's IP; the real producer dials
	// tcp://<Address>:<socketPort>.
	Address    string
	SocketPort int
	// ReplayPort is podDiscoveryConfig.replaySocketPort, 0 for none
	// (PodDiscoveryConfig.EffectiveReplayPort).
	ReplayPort int
	// TopicFilter is the SUB socket's subscription (kvEventsConfig.topicFilter,
	// default "kv@").
	TopicFilter string
}

// KVEventSource delivers an engine's KV events in order. It stands in for
// the ZMQ SUB socket the real producer opens per discovered Pod
// (kvEventsConfig.podDiscoveryConfig); the vLLM engine emulation publishes.
type KVEventSource interface {
	Subscribe(s Subscriber, deliver func(KVEvent)) (cancel func())
}

type kvEventsConfig struct {
	ZMQEndpoint        string `json:"zmqEndpoint,omitempty"`
	TopicFilter        string `json:"topicFilter,omitempty"`
	Concurrency        int    `json:"concurrency,omitempty"`
	EngineType         string `json:"engineType,omitempty"`
	DiscoverPods       bool   `json:"discoverPods,omitempty"`
	PodDiscoveryConfig *struct {
		PodLabelSelector string `json:"podLabelSelector,omitempty"`
		PodNamespace     string `json:"podNamespace,omitempty"`
		SocketPort       int    `json:"socketPort,omitempty"`
		ReplaySocketPort int    `json:"replaySocketPort,omitempty"`
	} `json:"podDiscoveryConfig,omitempty"`
}

type preciseParams struct {
	TokenProcessorConfig *struct {
		BlockSize       int    `json:"blockSize,omitempty"`
		BlockSizeTokens int    `json:"blockSizeTokens"`
		HashSeed        string `json:"hashSeed"`
	} `json:"tokenProcessorConfig"`
	IndexerConfig       json.RawMessage `json:"indexerConfig"`
	KVEventsConfig      *kvEventsConfig `json:"kvEventsConfig"`
	SpeculativeIndexing bool            `json:"speculativeIndexing"`
	SpeculativeTTL      string          `json:"speculativeTTL"`
}

// Precise is precise-prefix-cache-producer: it keeps an index of the KV
// blocks each engine reports holding, keyed by block keys the EPP computes
// from token IDs (16-token blocks by default, full blocks only, chained),
// and scores a request by the longest run of leading blocks each candidate
// holds. Emulated: the index as llm-d-router v0.10.0's pkg/kvevents and
// kvblock.InMemoryIndex keep it (see Apply), the key chain, the per-Pod
// subscription lifecycle with replay (ZMQSource) and the scoring; not
// emulated: speculative indexing, device tiers (vLLM reports every block
// on "GPU", weight 1), the index's LRU bounds, multimodal and cache_salt
// extra keys.
type Precise struct {
	name      string
	key       fw.DataKey
	blockSize int
	seed      string
	source    KVEventSource
	selector  labels.Selector
	namespace string
	port      int
	replay    int
	discover  bool
	filter    string

	mu    sync.RWMutex
	index map[uint64]map[string]struct{} // request key → pods ("ip:port")
	// engine maps an engine hash to the request keys it covers, shared by
	// all Pods and left alone by clears (InMemoryIndex.engineToRequestKeys).
	engine map[uint64][]uint64
	held   map[string]map[uint64]struct{} // pod → request keys
	// refs counts stores per pod, group and engine hash (eventDedupFilter).
	refs   map[string]map[groupHash]int
	groups map[string]map[int]string // pod → group → spec kind (GroupCatalog)
	subs   map[string]subscription
}

type groupHash struct {
	group int
	hash  uint64
}

type subscription struct {
	addr   string
	cancel func()
}

// NewPrecise is the precise producer's factory.
func NewPrecise(name string, dec *json.Decoder, source KVEventSource) (*Precise, error) {
	var p preciseParams
	if dec != nil {
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("failed to parse %s plugin config: %w", PreciseType, err)
		}
	}
	if p.SpeculativeIndexing {
		return nil, fmt.Errorf("failed to create %s plugin: %w", PreciseType, errors.New("speculativeIndexing is not emulated by the sim"))
	}
	pr := &Precise{name: name, key: fw.PrefixCacheMatchInfoKey.WithNonEmptyProducerName(name), blockSize: 16,
		source: source, index: map[uint64]map[string]struct{}{}, engine: map[uint64][]uint64{},
		subs: map[string]subscription{}, held: map[string]map[uint64]struct{}{}, refs: map[string]map[groupHash]int{},
		groups: map[string]map[int]string{}, port: 5557, filter: "kv@"}
	if tp := p.TokenProcessorConfig; tp != nil {
		if tp.BlockSizeTokens > 0 {
			pr.blockSize = tp.BlockSizeTokens
		} else if tp.BlockSize > 0 {
			pr.blockSize = tp.BlockSize
		}
		pr.seed = tp.HashSeed
	}
	if kv := p.KVEventsConfig; kv != nil {
		if kv.EngineType != "" && kv.EngineType != "vllm" && kv.EngineType != "sglang" {
			return nil, fmt.Errorf("failed to create %s plugin: failed to create KV-events engine adapter: unknown engine type %q", PreciseType, kv.EngineType)
		}
		pr.discover = kv.DiscoverPods
		if kv.TopicFilter != "" {
			pr.filter = kv.TopicFilter
		}
		if pd := kv.PodDiscoveryConfig; pd != nil {
			pr.namespace = pd.PodNamespace
			if pd.SocketPort > 0 {
				pr.port = pd.SocketPort
			}
			pr.replay = max(0, pd.ReplaySocketPort)
			if pd.PodLabelSelector != "" {
				sel, err := labels.Parse(pd.PodLabelSelector)
				if err != nil {
					return nil, fmt.Errorf("failed to create %s plugin: invalid podLabelSelector: %w", PreciseType, err)
				}
				pr.selector = sel
			}
		}
	}
	return pr, nil
}

// TypedName implements fw.Plugin.
func (p *Precise) TypedName() fw.TypedName { return fw.TypedName{Type: PreciseType, Name: p.name} }

// Produces implements fw.Producer.
func (p *Precise) Produces() []fw.DataKey { return []fw.DataKey{p.key} }

// Consumes implements fw.Consumer.
func (p *Precise) Consumes() []fw.DataKey { return []fw.DataKey{fw.TokenizedPromptKey} }

// BlockSize is the token processor's block size.
func (p *Precise) BlockSize() int { return p.blockSize }

// Keys computes the block keys of a token sequence: full blocks only, each
// key chained on the previous one, a sequence's first key chained on the
// hash of hashSeed and the model name (kvblock/token_processor.go
// getInitHash). The lookup path uses the request's target model
// (preciseprefixcache/blockkeys.go); the event path the model in the event's
// topic (kvevents/pool.go processEventBatch, engineadapter/common.go
// parseTopic), so events published under a topic without one ("kv@") never
// match a request's keys. Extra keys (LoRA, multimodal, cache_salt) are not
// emulated.
func (p *Precise) Keys(model string, tokens []uint32, parent *uint64) []uint64 {
	var prev uint64
	if parent != nil {
		prev = *parent
	} else {
		prev = xxhash.Sum64String(p.seed + "\x00" + model)
	}
	var out []uint64
	buf := make([]byte, 0, 8+p.blockSize*4)
	for i := 0; i+p.blockSize <= len(tokens); i += p.blockSize {
		buf = binary.LittleEndian.AppendUint64(buf[:0], prev)
		for _, t := range tokens[i : i+p.blockSize] {
			buf = binary.LittleEndian.AppendUint32(buf, t)
		}
		prev = xxhash.Sum64(buf)
		out = append(out, prev)
	}
	return out
}

// Watch opens a subscription when an endpoint matching the pod discovery
// selector joins, and on leaving drops the subscription and the endpoint's
// index entries but not its store counts (the producer's Extract:
// RemoveSubscriber and KVBlockIndex().Clear). A join for an endpoint already
// subscribed at the same address keeps its subscription and sequence state
// (SubscriberManager.EnsureSubscriber).
func (p *Precise) Watch(m *fw.EndpointMetadata, joined bool) {
	pod := m.HostPort()
	if !joined {
		p.mu.Lock()
		sub := p.subs[pod]
		delete(p.subs, pod)
		p.clearLocked(pod)
		p.mu.Unlock()
		if sub.cancel != nil {
			sub.cancel()
		}
		return
	}
	if !p.discover || p.source == nil || (p.namespace != "" && p.namespace != m.Namespace) ||
		(p.selector != nil && !p.selector.Matches(labels.Set(m.Labels))) {
		return
	}
	p.mu.RLock()
	same := p.subs[pod].addr == m.Address && p.subs[pod].cancel != nil
	p.mu.RUnlock()
	if same {
		return
	}
	cancel := p.source.Subscribe(Subscriber{Namespace: m.Namespace, Pod: m.PodName, Address: m.Address, SocketPort: p.port,
		ReplayPort: p.replay, TopicFilter: p.filter}, func(ev KVEvent) { p.Apply(pod, ev) })
	p.mu.Lock()
	old := p.subs[pod]
	p.subs[pod] = subscription{addr: m.Address, cancel: cancel}
	p.mu.Unlock()
	// Cancelled unlocked: a delivery in progress on it holds the source and
	// waits for p.mu in Apply.
	if old.cancel != nil {
		old.cancel()
	}
}

// TopicModel is the model segment of a "kv@<pod>@<model>" topic, "" for
// any other shape (engineadapter/common.go parseTopic).
func TopicModel(topic string) string {
	parts := strings.Split(topic, "@")
	if len(parts) == 3 {
		return parts[2]
	}
	return ""
}

// indexable is isPrefixIndexableSpecKind (pool.go): the cache kinds whose
// blocks form a prefix chain.
func indexable(kind string) bool {
	return kind == "full_attention" || kind == "mla_attention" || kind == "sink_full_attention"
}

// Apply ingests one event for pod ("ip:port") as processEventBatch in
// llm-d/llm-d-router@71f4f099:pkg/kvevents/pool.go does, on an index that
// behaves as kvblock.InMemoryIndex (pkg/kvcache/kvblock/in_memory.go):
//
//   - BlockStored: a grouped store of a kind without a prefix chain, or whose
//     tokens are not exactly one block_size per hash, is skipped
//     (blockStoredEventDigestible); a parent hash the index cannot map to a
//     request key skips the event; the keys are chained from the parent's
//     last request key, else seeded with the topic's model (lora_name when
//     set); the engine hashes map onto the keys by their count ratio
//     (engineToRequestMapping), replacing earlier mappings; each hash's store
//     count goes up, duplicates included.
//   - BlockRemoved: a grouped removal for a group the pod never stored under
//     a prefix kind is skipped; each hash's count goes down and only a hash
//     whose count reaches 0 (or was never counted) is evicted: the pod leaves
//     every request key the hash maps to, and the mapping goes once none of
//     them has a pod.
//   - AllBlocksCleared and Reset: the pod leaves every key and its counts go;
//     the engine mappings stay (InMemoryIndex.Clear).
func (p *Precise) Apply(pod string, ev KVEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	group := -1 // noGroupIdx
	if ev.GroupIdx != nil {
		group = *ev.GroupIdx
	}
	switch ev.Kind {
	case AllBlocksCleared, Reset:
		p.clearLocked(pod)
		delete(p.refs, pod)
	case BlockRemoved:
		if ev.GroupIdx != nil {
			if kind, ok := p.groups[pod][group]; !ok || !indexable(kind) {
				return
			}
		}
		for _, h := range ev.BlockHashes {
			k := groupHash{group, h}
			if n := p.refs[pod][k]; n > 1 {
				p.refs[pod][k] = n - 1
				continue
			}
			delete(p.refs[pod], k)
			p.evictLocked(pod, h)
		}
	case BlockStored:
		if ev.GroupIdx != nil {
			if ev.SpecKind == "" {
				ev.SpecKind = p.groups[pod][group]
			} else {
				if p.groups[pod] == nil {
					p.groups[pod] = map[int]string{}
				}
				p.groups[pod][group] = ev.SpecKind
			}
			if !indexable(ev.SpecKind) || len(ev.TokenIDs) > 0 && (ev.BlockSize <= 0 ||
				len(ev.TokenIDs)%ev.BlockSize != 0 || len(ev.TokenIDs)/ev.BlockSize != len(ev.BlockHashes)) {
				return
			}
		}
		var parent *uint64
		if ev.ParentBlockHash != nil && *ev.ParentBlockHash != 0 {
			rks := p.engine[*ev.ParentBlockHash]
			if len(rks) == 0 {
				return // the parent's mapping is gone: the chain cannot be rebuilt
			}
			parent = &rks[len(rks)-1]
		}
		model := TopicModel(ev.Topic)
		if ev.LoraName != nil && *ev.LoraName != "" {
			model = *ev.LoraName
		}
		keys := p.Keys(model, ev.TokenIDs, parent)
		if len(keys) == 0 {
			return // a tokenless device-tier update: vLLM sends none here
		}
		n := max(len(keys), len(ev.BlockHashes))
		mapped := map[uint64][]uint64{}
		for i := 0; i < n && len(ev.BlockHashes) > 0; i++ {
			h := ev.BlockHashes[i*len(ev.BlockHashes)/n]
			mapped[h] = append(mapped[h], keys[i*len(keys)/n])
		}
		for h, rks := range mapped {
			p.engine[h] = rks
		}
		if p.held[pod] == nil {
			p.held[pod] = map[uint64]struct{}{}
		}
		for _, k := range keys {
			set := p.index[k]
			if set == nil {
				set = map[string]struct{}{}
				p.index[k] = set
			}
			set[pod] = struct{}{}
			p.held[pod][k] = struct{}{}
		}
		if p.refs[pod] == nil {
			p.refs[pod] = map[groupHash]int{}
		}
		for _, h := range ev.BlockHashes {
			p.refs[pod][groupHash{group, h}]++
		}
	}
}

// evictLocked is InMemoryIndex.Evict for an engine key.
func (p *Precise) evictLocked(pod string, h uint64) {
	rks, ok := p.engine[h]
	if !ok {
		return
	}
	for _, k := range rks {
		p.dropLocked(pod, k)
	}
	for _, k := range rks {
		if len(p.index[k]) > 0 {
			return
		}
	}
	delete(p.engine, h)
}

func (p *Precise) dropLocked(pod string, key uint64) {
	if set := p.index[key]; set != nil {
		delete(set, pod)
		if len(set) == 0 {
			delete(p.index, key)
		}
	}
	delete(p.held[pod], key)
}

// clearLocked is InMemoryIndex.Clear: the pod leaves every key.
func (p *Precise) clearLocked(pod string) {
	for k := range p.held[pod] {
		p.dropLocked(pod, k)
	}
	delete(p.held, pod)
}

// Produce implements fw.Producer: without tokens it does nothing (the
// scorer then scores 0); otherwise every candidate gets the length of the
// run of leading blocks it holds, the total block count, and how many of
// the blocks it holds anywhere.
func (p *Precise) Produce(_ context.Context, req *fw.Request, eps []*fw.Endpoint) error {
	if req.Body == nil || req.Body.Tokens.TokenCount() == 0 {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	match := map[string]int{}
	cached := map[string]int{}
	total := 0
	for _, tokens := range req.Body.Tokens.PerPromptTokens {
		keys := p.Keys(req.TargetModel, tokens, nil)
		total += len(keys)
		active := map[string]bool{}
		for _, e := range eps {
			active[e.Meta.HostPort()] = true
		}
		for _, k := range keys {
			next := map[string]bool{}
			for pod := range p.index[k] {
				cached[pod]++
				if active[pod] {
					next[pod] = true
					match[pod]++
				}
			}
			active = next
		}
	}
	for _, e := range eps {
		hp := e.Meta.HostPort()
		info := fw.NewPrefixCacheMatchInfo(match[hp], total, p.blockSize)
		info.CachedBlockCount = cached[hp]
		e.Put(p.key.String(), info)
	}
	return nil
}
