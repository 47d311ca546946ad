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

	fw "github.com/gpustack/routing-conformance/clusters/sim/router/llmd/framework"
)

// PreciseType is the precise producer's plugin type.
const PreciseType = "precise-prefix-cache-producer"

// KVEventKind is a vLLM KV-cache event type.
type KVEventKind int

// The event kinds vLLM publishes on its KV-events socket (topic "kv@").
const (
	BlockStored KVEventKind = iota
	BlockRemoved
	AllBlocksCleared
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
}

// Subscriber identifies the engine whose events a subscription carries.
type Subscriber struct {
	Namespace, Pod string
	// Address is the engine Pod's IP; the real producer dials
	// tcp://<Address>:<socketPort>.
	Address    string
	SocketPort int
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
// holds. Emulated: the index, the key chain, the per-Pod subscription
// lifecycle and the scoring; not emulated: ZMQ transport, the replay
// socket, speculative indexing, device tiers (every block weighs 1).
type Precise struct {
	name      string
	key       fw.DataKey
	blockSize int
	seed      string
	source    KVEventSource
	selector  labels.Selector
	namespace string
	port      int
	discover  bool
	filter    string

	mu     sync.RWMutex
	index  map[uint64]map[string]struct{} // block key → pods ("ip:port")
	engine map[string]map[uint64]uint64   // pod → engine hash → block key
	subs   map[string]func()              // pod → cancel
	held   map[string]map[uint64]struct{} // pod → block keys
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
		source: source, index: map[uint64]map[string]struct{}{}, engine: map[string]map[uint64]uint64{},
		subs: map[string]func(){}, held: map[string]map[uint64]struct{}{}, port: 5557, filter: "kv@"}
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
// selector joins, and drops the endpoint's subscription and index entries
// when it leaves (the producer's endpoint extractor).
func (p *Precise) Watch(m *fw.EndpointMetadata, joined bool) {
	pod := m.HostPort()
	if !joined {
		p.mu.Lock()
		cancel := p.subs[pod]
		delete(p.subs, pod)
		p.clearLocked(pod)
		p.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return
	}
	if !p.discover || p.source == nil || (p.namespace != "" && p.namespace != m.Namespace) ||
		(p.selector != nil && !p.selector.Matches(labels.Set(m.Labels))) {
		return
	}
	cancel := p.source.Subscribe(Subscriber{Namespace: m.Namespace, Pod: m.PodName, Address: m.Address, SocketPort: p.port,
		TopicFilter: p.filter}, func(ev KVEvent) { p.Apply(pod, ev) })
	p.mu.Lock()
	old := p.subs[pod]
	p.subs[pod] = cancel
	p.mu.Unlock()
	// Cancelled unlocked: a delivery in progress on it holds the source and
	// waits for p.mu in Apply.
	if old != nil {
		old()
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

// Apply ingests one event for pod ("ip:port").
func (p *Precise) Apply(pod string, ev KVEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case AllBlocksCleared:
		p.clearLocked(pod)
	case BlockRemoved:
		for _, h := range ev.BlockHashes {
			if key, ok := p.engine[pod][h]; ok {
				delete(p.engine[pod], h)
				p.dropLocked(pod, key)
			}
		}
	case BlockStored:
		var parent *uint64
		if ev.ParentBlockHash != nil {
			k, ok := p.engine[pod][*ev.ParentBlockHash]
			if !ok {
				return // the parent was evicted: the chain cannot be rebuilt
			}
			parent = &k
		}
		keys := p.Keys(TopicModel(ev.Topic), ev.TokenIDs, parent)
		if p.engine[pod] == nil {
			p.engine[pod] = map[uint64]uint64{}
			p.held[pod] = map[uint64]struct{}{}
		}
		// One engine block per EPP block when the sizes agree (vLLM's 16);
		// otherwise engine hashes map to the last key they cover.
		per := 1
		if ev.BlockSize > 0 && ev.BlockSize != p.blockSize && len(ev.BlockHashes) > 0 {
			per = max(1, len(keys)/len(ev.BlockHashes))
		}
		for i, h := range ev.BlockHashes {
			if j := (i+1)*per - 1; j < len(keys) {
				p.engine[pod][h] = keys[j]
			}
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
	}
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

func (p *Precise) clearLocked(pod string) {
	for k := range p.held[pod] {
		p.dropLocked(pod, k)
	}
	delete(p.held, pod)
	delete(p.engine, pod)
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
