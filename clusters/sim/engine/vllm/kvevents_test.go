package vllm

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/engine/internal/enginetest"
	"github.com/gpustack/routing-conformance/clusters/sim/kvevents"
)

// The operator's --kv-events-config for a producing vLLM role under
// llm-d-router (docs/operator.md#engine-pods).
const operatorKVEvents = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","buffer_steps":10000,"hwm":100000,"max_queue_size":100000,"topic":"kv@"}`

type recorder struct {
	mu      sync.Mutex
	batches []kvevents.Batch
}

func (r *recorder) add(b kvevents.Batch) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []kvevents.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func TestKVEventsPublishStoredBlocksWithTheirTokensOnTheConfiguredTopic(t *testing.T) {
	bus := kvevents.NewBus()
	var rec recorder
	cancel := bus.Subscribe("127.0.0.1:5557", "kv@", rec.add)
	defer cancel()
	e := enginetest.Start(t, Program(Deps{KVEvents: bus}),
		[]string{"serve", model, "--kv-events-config", operatorKVEvents, "--host", "0.0.0.0", "--port", "8000"}, nil)
	if err := e.WaitReady(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	// 40 prompt ids: two full 16-token blocks (prefill); the output fills no third.
	if code, _, _ := post(t, e, "/v1/completions", idsPrompt(ids(1000, 40), `,"max_tokens":2`)); code != 200 {
		t.Fatalf("completion: %d", code)
	}
	got := rec.snapshot()
	if len(got) == 0 {
		t.Fatal("no KV event batch was published for a prompt of two full blocks")
	}
	var stored []kvevents.Event
	for _, b := range got {
		if b.Topic != "kv@" {
			t.Errorf("topic %q, want the configured %q sent verbatim", b.Topic, "kv@")
		}
		for _, ev := range b.Events {
			if ev.Kind == kvevents.BlockStored {
				stored = append(stored, ev)
			}
		}
	}
	if len(stored) != 1 || len(stored[0].BlockHashes) != 2 || stored[0].ParentBlockHash != nil || stored[0].BlockSize != 16 {
		t.Fatalf("stored events %+v, want one BlockStored of 2 blocks of 16, no parent", stored)
	}
	want := make([]uint32, 32)
	for i := range want {
		want[i] = uint32(1000 + i)
	}
	if !slices.Equal(stored[0].TokenIDs, want) {
		t.Fatalf("stored tokens %v, want the two blocks' ids %v", stored[0].TokenIDs, want)
	}

	// The same prefix again plus one more block: only the new block is
	// stored, chained on the last cached one.
	before := len(rec.snapshot())
	if code, _, _ := post(t, e, "/v1/completions", idsPrompt(ids(1000, 50), `,"max_tokens":2`)); code != 200 {
		t.Fatalf("completion: %d", code)
	}
	var again []kvevents.Event
	for _, b := range rec.snapshot()[before:] {
		again = append(again, b.Events...)
	}
	if len(again) != 1 || again[0].Kind != kvevents.BlockStored || len(again[0].BlockHashes) != 1 ||
		again[0].ParentBlockHash == nil || *again[0].ParentBlockHash != stored[0].BlockHashes[1] {
		t.Fatalf("second request's events %+v, want one new block whose parent is %d", again, stored[0].BlockHashes[1])
	}
}

func TestKVEventsOffWithoutConfigAndAddressTakenFailsStart(t *testing.T) {
	bus := kvevents.NewBus()
	var rec recorder
	defer bus.Subscribe("127.0.0.1:5557", "", rec.add)()
	e := start(t, nil, nil) // the unbound Main: no --kv-events-config
	post(t, e, "/v1/completions", idsPrompt(ids(1, 40), `,"max_tokens":1`))
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("%d batches without --kv-events-config", n)
	}

	held, err := bus.Bind("127.0.0.1:5557")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	second := enginetest.Start(t, Program(Deps{KVEvents: bus}),
		[]string{"serve", model, "--kv-events-config", operatorKVEvents, "--host", "0.0.0.0", "--port", "8000"}, nil)
	code, err := second.Wait(5 * time.Second)
	if err != nil || code != 1 {
		t.Fatalf("engine with its publisher address taken: code %d, %v; want exit 1", code, err)
	}
	if !strings.Contains(second.Stdout.String(), "Address already in use") {
		t.Fatalf("log does not name the bind failure:\n%s", second.Stdout.String())
	}
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
