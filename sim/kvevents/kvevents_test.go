package kvevents

import (
	"bytes"
	"encoding/hex"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// str is msgpack's fixstr: 0xa0|len, then the bytes.
func str(s string) string { return hex.EncodeToString(append([]byte{0xa0 | byte(len(s))}, s...)) }

// The expected bytes are written down from vLLM 0.29.0's struct definitions
// (vllm-project/vllm@98dff2a81:vllm/distributed/kv_events.py) and what the
// block pool fills in (vllm/v1/core/block_pool.py, kv_cache_manager.py),
// field by field, in msgspec's encoding: an array_like struct is a msgpack
// array of its fields; a tagged struct without array_like is a map whose
// first key is "type" with the class name, then the fields in declaration
// order, omitting those equal to their default (omit_defaults=True).
func TestEncodeWritesVLLMsKVEventBatchByteForByte(t *testing.T) {
	parent := uint64(0x8000000000000001) // ≥ 2^63: msgpack uint64, 0xcf
	b := Batch{TS: 1.5, DataParallelRank: 0, Events: []Event{
		{Kind: BlockStored, BlockHashes: []uint64{7, 300}, ParentBlockHash: &parent, TokenIDs: []uint32{1, 200}, BlockSize: 16},
		{Kind: BlockRemoved, BlockHashes: []uint64{7}},
		{Kind: AllBlocksCleared},
	}}
	want := strings.Join([]string{
		"93",                 // EventBatch, array_like: [ts, events, data_parallel_rank]
		"cb3ff8000000000000", // ts: float 1.5 → float64 (msgspec never shortens floats)
		"93",                 // events: 3
		// BlockStored: 11 keys. lora_id, medium, lora_name have no default and are
		// always written; extra_keys (a list), group_idx (0) and
		// kv_cache_spec_kind differ from their None defaults; the sliding
		// window, locality and ownership are None and omitted.
		"8b",
		str("type"), str("BlockStored"),
		str("block_hashes"), "92" + "07" + "cd012c", // [7, 300]: fixint, uint16
		str("parent_block_hash"), "cf8000000000000001",
		str("token_ids"), "92" + "01" + "ccc8", // [1, 200]: fixint, uint8
		str("block_size"), "10", // 16
		str("lora_id"), "c0", // None
		str("medium"), str("GPU"), // MEDIUM_GPU
		str("lora_name"), "c0",
		str("extra_keys"), "92c0c0", // one None per block: no LoRA, MM, salt
		str("group_idx"), "00",
		str("kv_cache_spec_kind"), str("full_attention"), // KVCacheSpecKind.FULL_ATTENTION
		// BlockRemoved: block_hashes, medium (no default), group_idx 0.
		"84",
		str("type"), str("BlockRemoved"),
		str("block_hashes"), "9107",
		str("medium"), str("GPU"),
		str("group_idx"), "00",
		// AllBlocksCleared: the tag alone.
		"81", str("type"), str("AllBlocksCleared"),
		"00", // data_parallel_rank: the publisher sets 0 (not the None default)
	}, "")
	got, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(got) != want {
		t.Fatalf("payload\n got %x\nwant %s", got, want)
	}
}

func TestDecodeReadsMapAndLegacyArrayEvents(t *testing.T) {
	parent := uint64(math.MaxUint64)
	in := Batch{TS: 2.25, DataParallelRank: 1, Events: []Event{
		{Kind: BlockStored, BlockHashes: []uint64{1, math.MaxUint64}, ParentBlockHash: &parent, TokenIDs: []uint32{5, 70000}, BlockSize: 16},
		{Kind: BlockStored, BlockHashes: []uint64{9}, TokenIDs: []uint32{1}, BlockSize: 16},
		{Kind: BlockRemoved, BlockHashes: []uint64{3}},
		{Kind: AllBlocksCleared},
	}}
	payload, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	// Encode writes group 0 and full_attention as vLLM 0.29.0 does; the
	// EPP reads them back (they decide whether a store is indexed).
	zero := 0
	want := Batch{TS: in.TS, DataParallelRank: 1, Events: append([]Event(nil), in.Events...)}
	for i := range want.Events[:3] {
		want.Events[i].GroupIdx = &zero
		if want.Events[i].Kind == BlockStored {
			want.Events[i].SpecKind = "full_attention"
		}
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("round trip\n got %+v\nwant %+v", out, want)
	}

	// vLLM before #42892: array_like events, bytes hashes (last 8 count),
	// and a batch without data_parallel_rank.
	legacy, _ := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockStored", []any{[]byte{0xaa, 0, 0, 0, 0, 0, 0, 0, 2}}, nil, []any{4, 5}, 16, nil},
		[]any{"BlockRemoved", []any{uint64(2)}},
		// lora_name at 7, group_idx at 9, kv_cache_spec_kind at 10 (BlockStored);
		// group_idx at 3 (BlockRemoved): vllm_adapter.go convertBlockStoredEvent.
		[]any{"BlockStored", []any{3}, nil, []any{1}, 16, nil, "GPU", "lora-a", nil, 2, "sliding_window"},
		[]any{"BlockRemoved", []any{3}, "GPU", 2},
	}})
	out, err = Decode(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Events) != 4 || out.Events[0].BlockHashes[0] != 2 || out.Events[0].ParentBlockHash != nil ||
		!reflect.DeepEqual(out.Events[0].TokenIDs, []uint32{4, 5}) || out.Events[1].Kind != BlockRemoved ||
		out.Events[0].GroupIdx != nil || out.Events[1].GroupIdx != nil {
		t.Fatalf("legacy batch decoded as %+v", out)
	}
	if e := out.Events[2]; e.LoraName == nil || *e.LoraName != "lora-a" || e.GroupIdx == nil || *e.GroupIdx != 2 || e.SpecKind != "sliding_window" {
		t.Fatalf("legacy BlockStored's LoRA/group fields decoded as %+v", e)
	}
	if e := out.Events[3]; e.GroupIdx == nil || *e.GroupIdx != 2 {
		t.Fatalf("legacy BlockRemoved's group decoded as %+v", e)
	}
	m, _ := msgpack.Marshal([]any{1.0, []any{map[string]any{"type": "BlockStored", "block_hashes": []any{1},
		"parent_block_hash": nil, "token_ids": []any{1}, "block_size": 16, "lora_name": "lora-b"}}})
	if out, err = Decode(m); err != nil || *out.Events[0].LoraName != "lora-b" || out.Events[0].GroupIdx != nil {
		t.Fatalf("map event with lora_name: %+v, %v", out, err)
	}

	for name, bad := range map[string]any{
		"unknown tag":  []any{1.0, []any{map[string]any{"type": "Other"}}},
		"no tag":       []any{1.0, []any{map[string]any{"block_hashes": []any{}}}},
		"ts not float": []any{"x", []any{}},
		"hash not int": []any{1.0, []any{map[string]any{"type": "BlockRemoved", "block_hashes": []any{"h"}}}},
		"no events":    []any{1.0},
		// vllm_adapter.go rejects a negative group_idx, and the whole batch with it.
		"negative group": []any{1.0, []any{map[string]any{"type": "BlockRemoved", "block_hashes": []any{1}, "group_idx": -1}}},
	} {
		p, _ := msgpack.Marshal(bad)
		if _, err := Decode(p); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestFramesAreTopicBigEndianSequenceAndPayload(t *testing.T) {
	f := Frames("kv@", 258, []byte{0x93})
	if string(f[0]) != "kv@" || !bytes.Equal(f[1], []byte{0, 0, 0, 0, 0, 0, 1, 2}) || !bytes.Equal(f[2], []byte{0x93}) {
		t.Fatalf("frames %x", f)
	}
	topic, seq, payload, err := ParseFrames(f)
	if err != nil || topic != "kv@" || seq != 258 || payload[0] != 0x93 {
		t.Fatalf("parsed %q %d %x %v", topic, seq, payload, err)
	}
	if _, _, _, err := ParseFrames(f[:2]); err == nil {
		t.Fatal("two frames parsed")
	}
	if _, _, _, err := ParseFrames([][]byte{{}, {1}, {}}); err == nil {
		t.Fatal("a 1-byte sequence frame parsed")
	}
}
