package prefixcache

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/gpustack/routing-conformance/sim/kvevents"
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

// fakeStream is a stream whose publisher buffered the batches in buf
// (payload = the sequence number as one byte) and records what it applied.
type fakeStream struct {
	*stream
	buf     map[uint64]bool
	applied []string
	asked   []uint64
	clock   time.Time
}

func newFakeStream(replay bool, buffered ...uint64) *fakeStream {
	f := &fakeStream{buf: map[uint64]bool{}, clock: time.Unix(1000, 0)}
	for _, s := range buffered {
		f.buf[s] = true
	}
	f.stream = &stream{now: func() time.Time { return f.clock }, stopped: func() bool { return false },
		emit:  func(_ string, p []byte) { f.applied = append(f.applied, strconv.Itoa(int(p[0]))) },
		reset: func() { f.applied = append(f.applied, "reset") }}
	if replay {
		f.replayFrom = func(start uint64, got func(string, uint64, []byte) bool) (bool, error) {
			f.asked = append(f.asked, start)
			for s := start; f.buf[s]; s++ {
				if !got("kv@", s, []byte{byte(s)}) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	return f
}

func (f *fakeStream) send(seqs ...uint64) {
	for _, s := range seqs {
		f.buf[s] = true
		f.live("kv@", s, []byte{byte(s)})
	}
}

func (f *fakeStream) expect(t *testing.T, applied string, asked ...uint64) {
	t.Helper()
	if got := strings.Join(f.applied, ","); got != applied {
		t.Errorf("applied %s, want %s", got, applied)
	}
	if fmt.Sprint(f.asked) != fmt.Sprint(asked) && !(len(asked) == 0 && len(f.asked) == 0) {
		t.Errorf("replays asked from %v, want %v", f.asked, asked)
	}
	f.applied, f.asked = nil, nil
}

// runSubscriber's sequence handling in
// llm-d/llm-d-router@71f4f099:pkg/kvevents/zmq_subscriber.go.
func TestStreamFollowsTheRoutersSequenceHandling(t *testing.T) {
	t.Run("without a replay endpoint every message is applied", func(t *testing.T) {
		f := newFakeStream(false)
		f.send(3, 3, 7, 1)
		f.expect(t, "3,3,7,1")
	})
	t.Run("proactive replay on connect, then duplicates and replayed sequences are skipped", func(t *testing.T) {
		f := newFakeStream(true, 0, 1, 2)
		f.replay(0) // what run does before the first Recv
		f.send(2, 3, 3)
		f.expect(t, "0,1,2,3", 0)
	})
	t.Run("a gap replays from the next expected sequence", func(t *testing.T) {
		f := newFakeStream(true, 0)
		f.replay(0)
		f.buf[1], f.buf[2] = true, true // published while the SUB missed them
		f.send(3)
		f.expect(t, "0,1,2,3", 0, 1)
	})
	t.Run("joining mid-stream replays everything", func(t *testing.T) {
		f := newFakeStream(true) // nothing buffered at connect
		f.replay(0)
		f.buf[0], f.buf[1] = true, true
		f.send(2)
		f.expect(t, "0,1,2", 0, 0)
	})
	t.Run("a sequence reset clears the source and replays from 0", func(t *testing.T) {
		f := newFakeStream(true, 0, 1, 2)
		f.replay(0)
		f.send(3)
		f.buf = map[uint64]bool{0: true} // the engine restarted
		f.send(1)
		f.expect(t, "0,1,2,3,reset,0,1", 0, 0)
	})
	t.Run("a replay missing the asked sequence fails: reset, then cooldown drops gapped messages", func(t *testing.T) {
		f := newFakeStream(true, 0)
		f.replay(0)
		f.send(5) // 1..4 are gone from the buffer
		f.send(6) // within the cooldown: dropped
		f.clock = f.clock.Add(replayCooldown)
		f.buf = map[uint64]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true}
		f.send(7) // replay allowed again: full replay (nothing applied since the reset)
		f.expect(t, "0,reset,0,1,2,3,4,5,6,7", 0, 1, 0)
	})
	t.Run("out-of-order replay frames fail the replay", func(t *testing.T) {
		f := newFakeStream(true)
		f.replayFrom = func(start uint64, got func(string, uint64, []byte) bool) (bool, error) {
			got("kv@", 0, []byte{0})
			got("kv@", 2, []byte{2})
			return false, nil
		}
		if f.replay(0) || f.hasLastSeq {
			t.Fatal("replay with a hole succeeded")
		}
		f.expect(t, "0,reset")
	})
}

// Over real ZMQ: with a replay port the subscriber asks vLLM's replay
// ROUTER from sequence 0 on connect ("Requesting proactive replay on
// connect"), so batches published before it subscribed reach the index.
func TestZMQSourceReplaysOnConnect(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pub, rtr := zmq4.NewPub(ctx), zmq4.NewRouter(ctx)
	defer pub.Close()
	defer rtr.Close()
	if pub.Listen("tcp://127.0.0.1:0") != nil || rtr.Listen("tcp://127.0.0.1:0") != nil {
		t.Fatal("listen")
	}
	port := func(s zmq4.Socket) int {
		_, p, _ := net.SplitHostPort(s.Addr().String())
		n, _ := strconv.Atoi(p)
		return n
	}
	var buffered [][]byte
	for i := range 2 {
		payload, _ := kvevents.Encode(kvevents.Batch{TS: 1, Events: []kvevents.Event{{Kind: kvevents.BlockRemoved, BlockHashes: []uint64{uint64(i)}}}})
		buffered = append(buffered, payload)
	}
	asked := make(chan uint64, 4)
	go func() { // ZmqEventPublisher._service_replay
		for {
			req, err := rtr.Recv()
			if err != nil {
				return
			}
			start := binary.BigEndian.Uint64(req.Frames[2])
			asked <- start
			for s := start; s < uint64(len(buffered)); s++ {
				_ = rtr.Send(zmq4.NewMsgFrom(append([][]byte{req.Frames[0], nil}, kvevents.Frames("kv@", s, buffered[s])...)...))
			}
			_ = rtr.Send(zmq4.NewMsgFrom(req.Frames[0], nil, nil, kvevents.EndSeq, nil))
		}
	}()
	got := make(chan KVEvent, 8)
	cancel := ZMQSource{}.Subscribe(Subscriber{Address: "127.0.0.1", SocketPort: port(pub), ReplayPort: port(rtr), TopicFilter: "kv@"},
		func(ev KVEvent) { got <- ev })
	defer cancel()
	select {
	case s := <-asked:
		if s != 0 {
			t.Fatalf("replay asked from %d, want 0", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no replay request on connect")
	}
	for i := range 2 {
		select {
		case ev := <-got:
			if ev.Kind != BlockRemoved || ev.BlockHashes[0] != uint64(i) {
				t.Fatalf("replayed event %d: %+v", i, ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("replayed event %d not delivered", i)
		}
	}
}
