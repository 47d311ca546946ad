package vllm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/gpustack/routing-conformance/sim/engine/internal/enginetest"
	"github.com/gpustack/routing-conformance/sim/kvevents"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// The operator's --kv-events-config for a producing vLLM role under
// llm-d-router (docs/operator.md#engine-pods).
const operatorKVEvents = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","buffer_steps":10000,"hwm":100000,"max_queue_size":100000,"topic":"kv@"}`

func startPublishing(t *testing.T) *enginetest.Engine {
	t.Helper()
	return start(t, []string{"--kv-events-config", operatorKVEvents}, nil)
}

// recv is one message or nothing within wait (zmq4's Recv has no timeout:
// a receive left running ends when the socket closes).
func recv(t *testing.T, sck zmq4.Socket, wait time.Duration) (zmq4.Msg, bool) {
	t.Helper()
	got := make(chan zmq4.Msg, 1)
	go func() {
		if m, err := sck.Recv(); err == nil {
			got <- m
		}
	}()
	select {
	case m := <-got:
		return m, true
	case <-time.After(wait):
		return zmq4.Msg{}, false
	}
}

// subscribe dials a SUB socket to the engine's KV-event port and returns
// the first message it receives, posting fresh prompts (a prompt of two
// full blocks each) until the subscription has reached the publisher: a
// PUB drops what is published before then.
func subscribe(t *testing.T, e *enginetest.Engine, filter string) (zmq4.Socket, zmq4.Msg, int) {
	t.Helper()
	sub := zmq4.NewSub(context.Background())
	t.Cleanup(func() { _ = sub.Close() })
	if err := sub.Dial("tcp://" + e.Addr(5557)); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, filter); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if code, _, _ := post(t, e, "/v1/completions", idsPrompt(ids(10_000*(i+1), 40), `,"max_tokens":1`)); code != 200 {
			t.Fatalf("completion: %d", code)
		}
		if m, ok := recv(t, sub, 200*time.Millisecond); ok {
			return sub, m, i
		}
	}
	t.Fatal("no KV event message reached the subscriber")
	return nil, zmq4.Msg{}, 0
}

func TestKVEventsGoOverZMQInVLLMsFramesWithSequenceNumbersAndReplay(t *testing.T) {
	e := startPublishing(t)
	// Published before anyone subscribes: sequence 0, received by nobody.
	if code, _, _ := post(t, e, "/v1/completions", idsPrompt(ids(1000, 40), `,"max_tokens":2`)); code != 200 {
		t.Fatalf("completion: %d", code)
	}
	sub, first, tries := subscribe(t, e, "kv@")
	topic, seq, payload, err := kvevents.ParseFrames(first.Frames)
	if err != nil {
		t.Fatal(err)
	}
	if topic != "kv@" || seq != uint64(tries)+1 {
		t.Fatalf("first message received: topic %q seq %d, want the configured topic verbatim and seq %d "+
			"(0 went out before the subscriber, and each earlier probe to nobody)", topic, seq, tries+1)
	}
	b, err := kvevents.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	// The probe's 40 prompt ids: two full 16-token blocks; the output fills no third.
	if len(b.Events) != 1 || b.Events[0].Kind != kvevents.BlockStored || len(b.Events[0].BlockHashes) != 2 ||
		b.Events[0].ParentBlockHash != nil || b.Events[0].BlockSize != 16 || b.DataParallelRank != 0 || b.TS < 1e9 {
		t.Fatalf("batch %+v, want one BlockStored of 2 blocks of 16, no parent, rank 0, a wall-clock ts", b)
	}
	if want := uint32s(ids(10_000*(tries+1), 32)); !slices.Equal(b.Events[0].TokenIDs, want) {
		t.Fatalf("stored tokens %v, want the two blocks' ids %v", b.Events[0].TokenIDs, want)
	}

	// The same prefix plus one block: the next sequence number, one new
	// block chained on the last cached one.
	if code, _, _ := post(t, e, "/v1/completions", idsPrompt(ids(10_000*(tries+1), 50), `,"max_tokens":2`)); code != 200 {
		t.Fatalf("completion: %d", code)
	}
	next, ok := recv(t, sub, 5*time.Second)
	if !ok {
		t.Fatal("no message for the extended prompt")
	}
	_, seq2, payload2, _ := kvevents.ParseFrames(next.Frames)
	b2, err := kvevents.Decode(payload2)
	if err != nil || seq2 != seq+1 || len(b2.Events) != 1 || len(b2.Events[0].BlockHashes) != 1 ||
		b2.Events[0].ParentBlockHash == nil || *b2.Events[0].ParentBlockHash != b.Events[0].BlockHashes[1] {
		t.Fatalf("seq %d batch %+v (%v), want seq %d with one block whose parent is %d", seq2, b2, err, seq+1, b.Events[0].BlockHashes[1])
	}

	// Replay from 0: every buffered message in order, the same bytes the
	// subscriber got, then the end marker (-1, empty payload).
	got := replay(t, e, 0)
	if len(got) != int(seq2)+1 {
		t.Fatalf("replay from 0 returned %d messages, want %d", len(got), seq2+1)
	}
	for i, m := range got {
		if m.seq != uint64(i) {
			t.Fatalf("replay message %d has seq %d", i, m.seq)
		}
	}
	if !bytes.Equal(got[seq].payload, payload) || !bytes.Equal(got[seq2].payload, payload2) {
		t.Fatal("replayed payloads differ from the published ones")
	}
	missed, err := kvevents.Decode(got[0].payload)
	if err != nil || !slices.Equal(missed.Events[0].TokenIDs, uint32s(ids(1000, 32))) {
		t.Fatalf("replayed seq 0 %+v (%v), want the batch published before anyone subscribed", missed, err)
	}
	if tail := replay(t, e, seq2); len(tail) != 1 || tail[0].seq != seq2 {
		t.Fatalf("replay from %d: %+v, want just that message", seq2, tail)
	}

	// A subscriber whose filter is not a prefix of the topic gets nothing.
	other := zmq4.NewSub(context.Background())
	defer other.Close()
	if err := other.Dial("tcp://" + e.Addr(5557)); err != nil {
		t.Fatal(err)
	}
	_ = other.SetOption(zmq4.OptionSubscribe, "xx")
	time.Sleep(100 * time.Millisecond)
	post(t, e, "/v1/completions", idsPrompt(ids(90_000, 40), `,"max_tokens":1`))
	if _, ok := recv(t, sub, 5*time.Second); !ok {
		t.Fatal("the kv@ subscriber missed a message")
	}
	if m, ok := recv(t, other, 300*time.Millisecond); ok {
		t.Fatalf("filter xx received %q", m.Frames[0])
	}
}

type replayed struct {
	seq     uint64
	payload []byte
}

// replay asks the replay socket for everything from start, as a DEALER
// (vLLM's ROUTER answers one request with many messages).
func replay(t *testing.T, e *enginetest.Engine, start uint64) []replayed {
	t.Helper()
	d := zmq4.NewDealer(context.Background(), zmq4.WithID(zmq4.SocketIdentity("replayer")))
	defer d.Close()
	if err := d.Dial("tcp://" + e.Addr(5558)); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, start))); err != nil {
		t.Fatal(err)
	}
	var out []replayed
	for {
		m, ok := recv(t, d, 5*time.Second)
		if !ok {
			t.Fatal("replay ended without the end marker")
		}
		// vLLM 0.29.0 answers [topic, seq, payload] after the delimiter, the
		// PUB's frames; llm-d-router v0.10.0's replay client
		// (pkg/kvevents/zmq_subscriber.go, requestReplay) reads exactly that
		// and the end marker as three frames with an empty payload.
		if len(m.Frames) != 4 || len(m.Frames[0]) != 0 {
			t.Fatalf("replay frames %q, want [empty, topic, seq, payload]", m.Frames)
		}
		if bytes.Equal(m.Frames[2], kvevents.EndSeq) {
			if len(m.Frames[1]) != 0 || len(m.Frames[3]) != 0 {
				t.Fatalf("end marker %q, want [empty, empty, -1, empty]", m.Frames)
			}
			return out
		}
		if string(m.Frames[1]) != "kv@" {
			t.Fatalf("replayed topic %q, want the configured kv@", m.Frames[1])
		}
		out = append(out, replayed{binary.BigEndian.Uint64(m.Frames[2]), m.Frames[3]})
	}
}

// llmdBatch is the batch shape llm-d-router v0.10.0's vLLM adapter decodes
// into (msgpackVLLMEventBatch in
// llm-d/llm-d-router@71f4f099:pkg/kvevents/engineadapter/vllm_adapter.go, the
// EPP's own pkg/kvevents): positional, the events kept raw.
type llmdBatch struct {
	_                struct{} `msgpack:",array"`
	TS               float64
	Events           []msgpack.RawMessage
	DataParallelRank *int `msgpack:",omitempty"`
}

func TestKVEventsDecodeAsLLMDRouterReadsThem(t *testing.T) {
	e := startPublishing(t)
	_, m, _ := subscribe(t, e, "kv@")
	// parseEventFrame (llm-d/llm-d-router@71f4f099:pkg/kvevents/zmq_subscriber.go):
	// exactly 3 frames, the sequence the big-endian first 8 bytes of frame 1.
	if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
		t.Fatalf("frames %d, sequence frame %d bytes", len(m.Frames), len(m.Frames[1]))
	}
	var batch llmdBatch
	if err := msgpack.Unmarshal(m.Frames[2], &batch); err != nil {
		t.Fatal(err)
	}
	if batch.TS < 1e9 || len(batch.Events) != 1 || batch.DataParallelRank == nil || *batch.DataParallelRank != 0 {
		t.Fatalf("batch ts %v, %d events, rank %v", batch.TS, len(batch.Events), batch.DataParallelRank)
	}
	// decodeVLLMEvent (same file) decodes an event into `any`: vLLM 0.29's is
	// a map keyed by field name with the tag under "type", which
	// mapEventToFields reorders into the positional layout.
	var ev any
	if err := msgpack.Unmarshal(batch.Events[0], &ev); err != nil {
		t.Fatal(err)
	}
	fields, ok := ev.(map[string]any)
	if !ok {
		t.Fatalf("event decodes to %T, want a map", ev)
	}
	raw, _ := json.Marshal(fields)
	for _, want := range []string{`"type":"BlockStored"`, `"block_size":16`, `"lora_id":null`, `"medium":"GPU"`,
		`"lora_name":null`, `"extra_keys":[null,null]`, `"group_idx":0`, `"kv_cache_spec_kind":"full_attention"`,
		`"parent_block_hash":null`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("event %s lacks %s", raw, want)
		}
	}
	if len(fields) != 11 {
		t.Errorf("event has %d fields, want vLLM 0.29's 11 (None-default ones omitted): %s", len(fields), raw)
	}
	// It is a map, not a legacy array: a reader that decodes events into
	// []any only (the adapter before vllm-project/vllm#42892 was handled)
	// would drop every batch.
	var positional []any
	if err := msgpack.Unmarshal(batch.Events[0], &positional); err == nil {
		t.Fatalf("a map event decoded as an array: %v", positional)
	}
}

func TestKVEventSocketsCloseWithTheEngine(t *testing.T) {
	e := startPublishing(t)
	pub, rep := e.Addr(5557), e.Addr(5558)
	for _, a := range []string{pub, rep} {
		c, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatalf("%s not listening while the engine runs: %v", a, err)
		}
		_ = c.Close()
	}
	if code := e.Stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, a := range []string{pub, rep} {
		if c, err := net.Dial("tcp", a); err == nil {
			_ = c.Close()
			t.Fatalf("%s still accepts after the engine stopped", a)
		}
	}
	// Leaked socket goroutines fail the package (goleak in TestMain).
}

func TestKVEventsOffWithoutConfigOrWithAConnectingEndpoint(t *testing.T) {
	e := start(t, nil, nil)
	if a := e.Addr(5557); a != "" {
		t.Fatalf("a KV-event socket at %s without --kv-events-config", a)
	}
	e = start(t, []string{"--kv-events-config", `{"enable_kv_cache_events":true,"endpoint":"tcp://10.1.2.3:5557"}`}, nil)
	if a := e.Addr(5557); a != "" {
		t.Fatalf("a connecting endpoint bound %s (vLLM binds only endpoints with * or ::)", a)
	}
}

func TestKVEventsAddressTakenFailsTheBindAsZMQDoes(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c := &proc.Container{Listen: func(string) (net.Listener, error) { return net.Listen("tcp", taken.Addr().String()) }}
	p, err := startKVEvents(operatorKVEvents, c)
	if p != nil || err == nil || !strings.Contains(err.Error(), "Address already in use (addr='tcp://*:5557')") {
		t.Fatalf("publisher %v, error %v; want pyzmq's EADDRINUSE message", p, err)
	}
}

func uint32s(v []int) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = uint32(x)
	}
	return out
}

func TestRenderReturnsThePromptTokenIDsTheEngineWouldPrefill(t *testing.T) {
	e := start(t, nil, nil)
	body := chatBody("Hello there, how are you?", "")
	code, _, out := post(t, e, "/v1/chat/completions/render", body)
	if code != 200 {
		t.Fatalf("render: %d %v", code, out)
	}
	raw, _ := json.Marshal(out["token_ids"])
	var got []uint32
	if err := json.Unmarshal(raw, &got); err != nil || len(got) == 0 {
		t.Fatalf("token_ids %s: %v", raw, err)
	}
	_, _, tok := post(t, e, "/tokenize", body)
	raw, _ = json.Marshal(tok["tokens"])
	var want []uint32
	_ = json.Unmarshal(raw, &want)
	if !slices.Equal(got, want) {
		t.Fatalf("render ids %v differ from /tokenize's %v", got, want)
	}
	if out["model"] != model {
		t.Fatalf("model %v", out["model"])
	}
	code, _, out = post(t, e, "/v1/chat/completions/render", enginetest.ChatBody("other", "hi", ""))
	if code != 404 {
		t.Fatalf("render of an unknown model: %d %v, want 404", code, out)
	}
	code, _, b, err := e.Post("/v1/completions/render", `{"model":"`+model+`","prompt":"abc"}`)
	if err != nil || code != 200 || len(b) == 0 || b[0] != '[' {
		t.Fatalf("completions render: %d %q %v, want a JSON list", code, b, err)
	}
}
