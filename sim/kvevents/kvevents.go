// Package kvevents is vLLM's KV-cache event wire format: the frames of one
// ZMQ message and the msgpack batch inside it, as vLLM 0.29.0's
// ZmqEventPublisher sends them and llm-d-router v0.10.0's EPP reads them
// (its own pkg/kvevents: zmq_subscriber.go, engineadapter/vllm_adapter.go).
// The sim's vLLM emulation encodes with it and the emulated EPP's precise
// prefix producer decodes with it, so both ends read the bytes the real
// engine and the real EPP exchange. The sockets are the users' business.
//
// A message is three frames (vllm-project/vllm@98dff2a81:vllm/distributed/kv_events.py,
// ZmqEventPublisher._publisher_thread): the topic (KVEventsConfig.topic,
// UTF-8, verbatim), the sequence number (8 bytes, big-endian, counting from
// 0), and the payload, msgspec's msgpack encoding of a KVEventBatch.
//
// The batch is array-like ([ts, events, data_parallel_rank]); each event is
// a tagged map whose "type" key comes first, then the fields in declaration
// order, fields left at their None default omitted (omit_defaults). vLLM
// dropped array_like from the events in vllm-project/vllm#42892; the batch
// kept it. See Encode for the fields.
package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Kind is a KV-cache event type: the msgspec tag, the class name.
type Kind string

// The event kinds vLLM's prefix cache emits.
const (
	BlockStored      Kind = "BlockStored"
	BlockRemoved     Kind = "BlockRemoved"
	AllBlocksCleared Kind = "AllBlocksCleared"
)

// Event is one KV-cache event. BlockStored carries the engine's hashes of
// the newly cached full blocks, the hash of the block before the first of
// them (nil when the first is a sequence's first block), their token IDs and
// the block size; BlockRemoved the evicted hashes.
type Event struct {
	Kind            Kind
	BlockHashes     []uint64
	ParentBlockHash *uint64
	TokenIDs        []uint32
	BlockSize       int

	// Read by Decode only, because the EPP acts on them: lora_name replaces
	// the topic's model in the block keys, group_idx with kv_cache_spec_kind
	// decides whether a store is indexed (llm-d/llm-d-router@71f4f099:pkg/kvevents/pool.go
	// processEventBatch). Encode always writes vLLM 0.29.0's values for a
	// non-LoRA engine: lora_name nil, group_idx 0, "full_attention".
	LoraName *string
	GroupIdx *int
	SpecKind string
}

// Batch is one KVEventBatch: an engine step's events.
type Batch struct {
	// TS is the publish time, seconds since the epoch (time.time()).
	TS     float64
	Events []Event
	// DataParallelRank is set by the publisher (0 without data parallelism).
	DataParallelRank int
}

// What vLLM 0.29.0 puts in the fields the sim has no use for, for a
// text-only, non-LoRA engine with one full-attention KV-cache group
// (vllm-project/vllm@98dff2a81:vllm/v1/core/block_pool.py
// _build_block_stored_event and _emit_block_removed_events;
// vllm/v1/core/kv_cache_manager.py take_events, which sets the spec kind).
const (
	mediumGPU     = "GPU"            // MEDIUM_GPU
	fullAttention = "full_attention" // KVCacheSpecKind.FULL_ATTENTION
)

// Encode is the msgpack payload of b, byte for byte what msgspec writes for
// the same KVEventBatch:
//
//	[ts float64, [event...], data_parallel_rank]
//	BlockStored:  {type, block_hashes, parent_block_hash, token_ids, block_size,
//	               lora_id: nil, medium: "GPU", lora_name: nil,
//	               extra_keys: [nil per block], group_idx: 0,
//	               kv_cache_spec_kind: "full_attention"}
//	BlockRemoved: {type, block_hashes, medium: "GPU", group_idx: 0}
//	AllBlocksCleared: {type}
//
// lora_id, medium and lora_name have no default, so they are written even
// when nil; extra_keys is a list (one None per block without extra keys),
// group_idx 0 and the spec kind differ from their None defaults, so they
// are written too; kv_cache_spec_sliding_window, locality and ownership stay
// None and are omitted. Integers take msgpack's smallest form and the
// timestamp a float64, as msgspec writes them.
func Encode(b Batch) ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	w := writer{e: e}
	w.arrayLen(3)
	w.do(e.EncodeFloat64(b.TS))
	w.arrayLen(len(b.Events))
	for _, ev := range b.Events {
		w.event(ev)
	}
	w.do(e.EncodeInt(int64(b.DataParallelRank)))
	if w.err != nil {
		return nil, w.err
	}
	return buf.Bytes(), nil
}

// writer keeps the first encoding error so Encode reads as the layout.
type writer struct {
	e   *msgpack.Encoder
	err error
}

func (w *writer) do(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *writer) arrayLen(n int) { w.do(w.e.EncodeArrayLen(n)) }
func (w *writer) key(k string)   { w.do(w.e.EncodeString(k)) }

func (w *writer) uints(v []uint64) {
	w.arrayLen(len(v))
	for _, x := range v {
		w.do(w.e.EncodeUint(x))
	}
}

func (w *writer) event(ev Event) {
	switch ev.Kind {
	case BlockStored:
		w.do(w.e.EncodeMapLen(11))
		w.key("type")
		w.do(w.e.EncodeString(string(ev.Kind)))
		w.key("block_hashes")
		w.uints(ev.BlockHashes)
		w.key("parent_block_hash")
		if ev.ParentBlockHash == nil {
			w.do(w.e.EncodeNil())
		} else {
			w.do(w.e.EncodeUint(*ev.ParentBlockHash))
		}
		w.key("token_ids")
		w.arrayLen(len(ev.TokenIDs))
		for _, t := range ev.TokenIDs {
			w.do(w.e.EncodeUint(uint64(t)))
		}
		w.key("block_size")
		w.do(w.e.EncodeInt(int64(ev.BlockSize)))
		w.key("lora_id")
		w.do(w.e.EncodeNil())
		w.key("medium")
		w.do(w.e.EncodeString(mediumGPU))
		w.key("lora_name")
		w.do(w.e.EncodeNil())
		w.key("extra_keys")
		w.arrayLen(len(ev.BlockHashes))
		for range ev.BlockHashes {
			w.do(w.e.EncodeNil())
		}
		w.key("group_idx")
		w.do(w.e.EncodeUint(0))
		w.key("kv_cache_spec_kind")
		w.do(w.e.EncodeString(fullAttention))
	case BlockRemoved:
		w.do(w.e.EncodeMapLen(4))
		w.key("type")
		w.do(w.e.EncodeString(string(ev.Kind)))
		w.key("block_hashes")
		w.uints(ev.BlockHashes)
		w.key("medium")
		w.do(w.e.EncodeString(mediumGPU))
		w.key("group_idx")
		w.do(w.e.EncodeUint(0))
	case AllBlocksCleared:
		w.do(w.e.EncodeMapLen(1))
		w.key("type")
		w.do(w.e.EncodeString(string(ev.Kind)))
	default:
		w.do(fmt.Errorf("kvevents: unknown event kind %q", ev.Kind))
	}
}

// Decode reads a KVEventBatch payload the way llm-d-router v0.10.0's vLLM
// adapter does (llm-d/llm-d-router@71f4f099:pkg/kvevents/engineadapter/vllm_adapter.go,
// ParseMessage, decodeVLLMEvent, mapEventToFields): the batch positionally,
// each event either a tagged map (vLLM since vllm-project/vllm#42892, what
// 0.29.0 sends) or a legacy tagged array ([tag, block_hashes,
// parent_block_hash, token_ids, block_size, lora_id, medium, lora_name,
// extra_keys, group_idx, kv_cache_spec_kind]); a hash is an integer or bytes
// (the last 8, big-endian). One bad event fails the whole batch, as there.
// Fields the EPP does not act on are skipped.
func Decode(payload []byte) (Batch, error) {
	var top []any
	if err := msgpack.Unmarshal(payload, &top); err != nil {
		return Batch{}, fmt.Errorf("kvevents: batch: %w", err)
	}
	if len(top) < 2 {
		return Batch{}, fmt.Errorf("kvevents: batch of %d fields, want ts and events", len(top))
	}
	var b Batch
	ts, ok := top[0].(float64)
	if !ok {
		return Batch{}, fmt.Errorf("kvevents: ts is %T", top[0])
	}
	b.TS = ts
	raw, ok := top[1].([]any)
	if !ok {
		return Batch{}, fmt.Errorf("kvevents: events is %T", top[1])
	}
	if len(top) > 2 && top[2] != nil {
		r, err := toUint(top[2])
		if err != nil {
			return Batch{}, fmt.Errorf("kvevents: data_parallel_rank: %w", err)
		}
		b.DataParallelRank = int(r)
	}
	for i, r := range raw {
		ev, err := decodeEvent(r)
		if err != nil {
			return Batch{}, fmt.Errorf("kvevents: event %d: %w", i, err)
		}
		b.Events = append(b.Events, ev)
	}
	return b, nil
}

// positions are the legacy array layout's indexes (tag at 0), per kind
// (blockStoredFieldOrder and blockRemovedFieldOrder in vllm_adapter.go).
var positions = map[Kind]map[string]int{
	BlockStored: {"block_hashes": 1, "parent_block_hash": 2, "token_ids": 3, "block_size": 4,
		"lora_name": 7, "group_idx": 9, "kv_cache_spec_kind": 10},
	BlockRemoved: {"block_hashes": 1, "group_idx": 3},
}

func decodeEvent(raw any) (Event, error) {
	field := func(string) any { return nil }
	var tag any
	switch v := raw.(type) {
	case map[string]any:
		tag = v["type"]
		field = func(name string) any { return v[name] }
	case []any:
		if len(v) > 0 {
			tag = v[0]
		}
		field = func(name string) any {
			tag, _ := v[0].(string)
			if i, ok := positions[Kind(tag)][name]; ok && i < len(v) {
				return v[i]
			}
			return nil
		}
	default:
		return Event{}, fmt.Errorf("neither a map nor an array: %T", raw)
	}
	kind, ok := tag.(string)
	if !ok {
		return Event{}, fmt.Errorf("tag is %T", tag)
	}
	ev := Event{Kind: Kind(kind)}
	var err error
	switch ev.Kind {
	case AllBlocksCleared:
		return ev, nil
	case BlockStored, BlockRemoved:
		if ev.BlockHashes, err = hashes(field("block_hashes")); err != nil {
			return Event{}, err
		}
	default:
		return Event{}, fmt.Errorf("unknown tag %q", kind)
	}
	if g := field("group_idx"); g != nil {
		n, err := toUint(g)
		if err != nil || int64(n) < 0 {
			return Event{}, fmt.Errorf("group_idx: %v (%w)", g, err)
		}
		i := int(n)
		ev.GroupIdx = &i
	}
	if ev.Kind == BlockRemoved {
		return ev, nil
	}
	if l := field("lora_name"); l != nil {
		s, ok := l.(string)
		if !ok {
			return Event{}, fmt.Errorf("lora_name is %T", l)
		}
		ev.LoraName = &s
	}
	if k := field("kv_cache_spec_kind"); k != nil {
		s, ok := k.(string)
		if !ok {
			return Event{}, fmt.Errorf("kv_cache_spec_kind is %T", k)
		}
		ev.SpecKind = s
	}
	if p := field("parent_block_hash"); p != nil {
		h, err := hash(p)
		if err != nil {
			return Event{}, fmt.Errorf("parent_block_hash: %w", err)
		}
		ev.ParentBlockHash = &h
	}
	toks, ok := field("token_ids").([]any)
	if !ok {
		return Event{}, fmt.Errorf("token_ids is %T", field("token_ids"))
	}
	for _, t := range toks {
		n, err := toUint(t)
		if err != nil {
			return Event{}, fmt.Errorf("token_ids: %w", err)
		}
		ev.TokenIDs = append(ev.TokenIDs, uint32(n))
	}
	size, err := toUint(field("block_size"))
	if err != nil {
		return Event{}, fmt.Errorf("block_size: %w", err)
	}
	ev.BlockSize = int(size)
	return ev, nil
}

func hashes(v any) ([]uint64, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("block_hashes is %T", v)
	}
	out := make([]uint64, 0, len(list))
	for _, x := range list {
		h, err := hash(x)
		if err != nil {
			return nil, fmt.Errorf("block_hashes: %w", err)
		}
		out = append(out, h)
	}
	return out, nil
}

// hash reads an ExternalBlockHash: an int (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES,
// the default) or the raw hash bytes, of which the last 8 count.
func hash(v any) (uint64, error) {
	if b, ok := v.([]byte); ok {
		if len(b) == 0 {
			return 0, errors.New("empty hash")
		}
		var pad [8]byte
		copy(pad[max(0, 8-len(b)):], b[max(0, len(b)-8):])
		return binary.BigEndian.Uint64(pad[:]), nil
	}
	return toUint(v)
}

func toUint(v any) (uint64, error) {
	switch n := v.(type) {
	case uint64:
		return n, nil
	case uint32:
		return uint64(n), nil
	case uint16:
		return uint64(n), nil
	case uint8:
		return uint64(n), nil
	case int64:
		return uint64(n), nil
	case int32:
		return uint64(n), nil
	case int16:
		return uint64(n), nil
	case int8:
		return uint64(n), nil
	}
	return 0, fmt.Errorf("not an integer: %T", v)
}

// Frames is one message's frames: topic, sequence number, payload.
func Frames(topic string, seq uint64, payload []byte) [][]byte {
	return [][]byte{[]byte(topic), binary.BigEndian.AppendUint64(nil, seq), payload}
}

// ParseFrames splits a received message as llm-d-router v0.10.0's
// subscriber does (parseEventFrame in llm-d/llm-d-router@71f4f099:pkg/kvevents/zmq_subscriber.go):
// exactly three frames, the sequence number the first 8 bytes of the second.
func ParseFrames(frames [][]byte) (topic string, seq uint64, payload []byte, err error) {
	if len(frames) != 3 {
		return "", 0, nil, fmt.Errorf("kvevents: %d frames, want 3", len(frames))
	}
	if len(frames[1]) < 8 {
		return "", 0, nil, fmt.Errorf("kvevents: sequence frame of %d bytes, want 8", len(frames[1]))
	}
	return string(frames[0]), binary.BigEndian.Uint64(frames[1]), frames[2], nil
}

// EndSeq is the sequence frame that ends a replay: -1 as 8 signed
// big-endian bytes (ZmqEventPublisher.END_SEQ), followed by an empty payload.
var EndSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ReplayBuffer is vLLM's default buffer_steps: the batches kept for replay.
const ReplayBuffer = 10_000
