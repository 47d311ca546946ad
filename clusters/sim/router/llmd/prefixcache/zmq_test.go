package prefixcache

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/gpustack/routing-conformance/clusters/sim/kvevents"
)

func TestZMQSourceReadsVLLMsWireAndStopsOnCancel(t *testing.T) {
	pub := zmq4.NewPub(context.Background())
	defer pub.Close()
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(pub.Addr().String())
	p, _ := strconv.Atoi(port)
	got := make(chan KVEvent, 16)
	cancel := ZMQSource{}.Subscribe(Subscriber{Address: host, SocketPort: p, TopicFilter: "kv@"}, func(ev KVEvent) { got <- ev })
	parent := uint64(7)
	send := func(seq uint64, topic string, evs ...kvevents.Event) {
		payload, err := kvevents.Encode(kvevents.Batch{TS: 1, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		_ = pub.Send(zmq4.NewMsgFrom(kvevents.Frames(topic, seq, payload)...))
	}
	// A PUB drops messages until the subscription reaches it: send until one arrives.
	var first KVEvent
	for i := 0; ; i++ {
		send(uint64(i), "kv@10.0.0.1@m", kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: []uint64{8},
			ParentBlockHash: &parent, TokenIDs: []uint32{1, 2}, BlockSize: 2})
		select {
		case first = <-got:
		case <-time.After(100 * time.Millisecond):
			if i == 50 {
				t.Fatal("nothing delivered")
			}
			continue
		}
		break
	}
	if first.Topic != "kv@10.0.0.1@m" || first.Kind != BlockStored || first.BlockHashes[0] != 8 ||
		*first.ParentBlockHash != 7 || len(first.TokenIDs) != 2 || first.BlockSize != 2 {
		t.Fatalf("delivered %+v", first)
	}
	for len(got) > 0 {
		<-got
	}
	send(100, "other", kvevents.Event{Kind: kvevents.AllBlocksCleared})                     // filtered out
	_ = pub.Send(zmq4.NewMsgFrom([]byte("kv@"), []byte{1}, []byte{0x93}))                   // malformed: dropped
	send(101, "kv@", kvevents.Event{Kind: kvevents.BlockRemoved, BlockHashes: []uint64{8}}) // delivered
	select {
	case ev := <-got:
		if ev.Kind != BlockRemoved || ev.Topic != "kv@" {
			t.Fatalf("after the filtered and malformed ones: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("BlockRemoved not delivered")
	}
	cancel()
	send(102, "kv@", kvevents.Event{Kind: kvevents.AllBlocksCleared})
	select {
	case ev := <-got:
		t.Fatalf("delivered after cancel: %+v", ev)
	case <-time.After(200 * time.Millisecond):
	}
}
