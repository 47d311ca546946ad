package prefixcache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/gpustack/routing-conformance/sim/kvevents"
)

// Timings of llm-d-router v0.10.0's subscriber
// (llm-d/llm-d-router@71f4f099:pkg/kvevents/zmq_subscriber.go): a failed
// socket is dialled again after retryInterval; a replay attempt ends after
// replayAttemptIdleTimeout without a frame, a replay after replayTimeout,
// three attempts without progress fail it, and a failed replay is not
// retried for replayCooldown. Variables so tests can shorten them.
var (
	zmqRetry         = 5 * time.Second
	replayIdle       = 2 * time.Second
	replayTimeout    = 2 * time.Minute
	replayBackoff    = 100 * time.Millisecond
	replayCooldown   = 30 * time.Second
	replayNoProgress = 3
)

// ZMQSource subscribes over real ZMQ as llm-d-router v0.10.0's own
// pkg/kvevents does for each discovered Pod (zmqSubscriber, created by
// SubscriberManager.EnsureSubscriber from preciseprefixcache/extractor.go):
// a SUB socket (zmq4, no automatic reconnect) dialled to
// tcp://<pod IP>:<socketPort>, subscribed to the topic filter, each message
// three frames (topic, 8-byte sequence, payload). With a replay port it asks
// vLLM's replay ROUTER for the buffered batches on connect, on a sequence
// gap, on joining mid-stream and after a sequence reset (see stream.live).
// Payloads are decoded as the router's vLLM adapter does; a batch that does
// not decode is dropped whole (Pool.processRawMessage).
type ZMQSource struct{}

// Subscribe implements KVEventSource. cancel closes the sockets and returns
// once no delivery is in progress.
func (ZMQSource) Subscribe(s Subscriber, deliver func(KVEvent)) (cancel func()) {
	ctx, stop := context.WithCancel(context.Background())
	ep := "tcp://" + net.JoinHostPort(s.Address, strconv.Itoa(s.SocketPort))
	st := &stream{filter: s.TopicFilter, now: time.Now, emit: func(topic string, payload []byte) {
		emitBatch(ctx, topic, payload, deliver)
	}, reset: func() {
		if ctx.Err() == nil { // a cancelled subscription no longer owns the Pod's entries
			deliver(KVEvent{Kind: Reset})
		}
	}, stopped: func() bool { return ctx.Err() != nil }}
	if s.ReplayPort > 0 {
		rep := "tcp://" + net.JoinHostPort(s.Address, strconv.Itoa(s.ReplayPort))
		st.replayFrom = func(start uint64, got func(topic string, seq uint64, payload []byte) bool) (bool, error) {
			return replayAttempt(ctx, rep, start, got)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			st.run(ctx, ep)
			select {
			case <-ctx.Done():
				return
			case <-time.After(zmqRetry):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { stop(); wg.Wait() }) }
}

// emitBatch decodes one payload and delivers its events in order.
func emitBatch(ctx context.Context, topic string, payload []byte, deliver func(KVEvent)) {
	batch, err := kvevents.Decode(payload)
	if err != nil {
		return
	}
	for _, ev := range batch.Events {
		if ctx.Err() != nil {
			return
		}
		deliver(KVEvent{Topic: topic, Kind: kinds[ev.Kind], BlockHashes: ev.BlockHashes,
			ParentBlockHash: ev.ParentBlockHash, TokenIDs: ev.TokenIDs, BlockSize: ev.BlockSize,
			LoraName: ev.LoraName, GroupIdx: ev.GroupIdx, SpecKind: ev.SpecKind})
	}
}

var kinds = map[kvevents.Kind]KVEventKind{
	kvevents.BlockStored:      BlockStored,
	kvevents.BlockRemoved:     BlockRemoved,
	kvevents.AllBlocksCleared: AllBlocksCleared,
}

// stream is one subscriber's sequence state; it outlives reconnections, as
// zmqSubscriber's lastSeq/lastLiveSeq/lastReplayFailure do.
type stream struct {
	filter string
	now    func() time.Time
	emit   func(topic string, payload []byte)
	// reset clears the source's index entries (Pool.resetForSource).
	reset   func()
	stopped func() bool
	// replayFrom runs one replay attempt from start, handing each frame to
	// got (false stops it); it reports whether the end marker came. nil
	// without a replay endpoint.
	replayFrom func(start uint64, got func(topic string, seq uint64, payload []byte) bool) (bool, error)

	lastSeq, lastLiveSeq       uint64
	hasLastSeq, hasLastLiveSeq bool
	lastFailure                time.Time
}

// run is runSubscriber: one SUB socket until it fails or ctx ends.
func (z *stream) run(ctx context.Context, ep string) {
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if sub.Dial(ep) != nil || sub.SetOption(zmq4.OptionSubscribe, z.filter) != nil {
		return
	}
	// "Requesting proactive replay on connect": only while nothing has been
	// applied yet, so a reconnect relies on gap detection instead.
	if z.replayFrom != nil && !z.hasLastSeq && z.canReplay() {
		z.replay(0)
	}
	for {
		msg, err := sub.Recv()
		if err != nil || ctx.Err() != nil {
			return
		}
		topic, seq, payload, err := kvevents.ParseFrames(msg.Frames)
		if err != nil {
			continue // "Malformed event frame"
		}
		z.live(topic, seq, payload)
	}
}

// live is runSubscriber's handling of one live message, step for step.
func (z *stream) live(topic string, seq uint64, payload []byte) {
	if z.replayFrom == nil {
		z.emit(topic, payload) // no replay endpoint: every message, gaps and all
		return
	}
	replayed := false
	if z.hasLastLiveSeq && seq < z.lastLiveSeq {
		// The publisher restarted: drop what it reported and rebuild.
		z.reset()
		z.lastSeq, z.hasLastSeq, z.lastFailure = 0, false, time.Time{}
		replayed = true
		z.replay(0)
	}
	if z.hasLastLiveSeq && seq == z.lastLiveSeq {
		return // a duplicate of the last live message
	}
	z.lastLiveSeq, z.hasLastLiveSeq = seq, true
	if z.hasLastSeq && seq <= z.lastSeq {
		return // already applied (by a replay)
	}
	if z.hasLastSeq && seq > z.lastSeq+1 {
		if !z.canReplay() {
			return // "Dropping event while replay is in cooldown"
		}
		replayed = true
		if !z.replay(z.lastSeq + 1) {
			return
		}
	}
	if !z.hasLastSeq && seq > 0 {
		if replayed || !z.canReplay() {
			return
		}
		if !z.replay(0) { // "Joining mid-stream, requesting full replay"
			return
		}
	}
	if z.hasLastSeq && seq != z.lastSeq+1 {
		return
	}
	z.emit(topic, payload)
	z.lastSeq, z.hasLastSeq = seq, true
}

func (z *stream) canReplay() bool {
	return z.lastFailure.IsZero() || z.now().Sub(z.lastFailure) >= replayCooldown
}

// fail is invalidateReplay: the source's entries go, the stream starts over
// and replay waits out the cooldown.
func (z *stream) fail() bool {
	z.reset()
	z.lastSeq, z.hasLastSeq, z.lastFailure = 0, false, z.now()
	return false
}

// replay is requestReplay: attempts resume where the last one stopped;
// frames out of order, an empty replay of a later start, three attempts
// without progress or the overall timeout fail it. Replayed batches are
// applied as they arrive, so a failure after some clears them again.
func (z *stream) replay(start uint64) bool {
	deadline := z.now().Add(replayTimeout)
	next, total, stalls := start, 0, 0
	for z.now().Before(deadline) && !z.stopped() {
		expected, progressed := next, 0
		var bad error
		complete, err := z.replayFrom(next, func(topic string, seq uint64, payload []byte) bool {
			if seq != expected {
				bad = fmt.Errorf("incomplete replay: expected sequence %d, got %d", expected, seq)
				return false
			}
			z.emit(topic, payload)
			z.lastSeq, z.hasLastSeq = seq, true
			expected++
			progressed++
			total++
			return true
		})
		if bad != nil || errors.Is(err, errReplayFailed) {
			return z.fail()
		}
		if complete {
			if total == 0 && start > 0 {
				return z.fail() // "sequence %d was not available"
			}
			z.lastFailure = time.Time{}
			return true
		}
		if progressed == 0 {
			if stalls++; stalls >= replayNoProgress {
				return z.fail()
			}
		} else {
			stalls, next = 0, expected
		}
		time.Sleep(replayBackoff)
	}
	return z.fail()
}

// errReplayFailed ends a replay at once: a malformed frame, or the replay
// socket could not be dialled or written.
var errReplayFailed = errors.New("replay failed")

// replayAttempt is one DEALER conversation with vLLM's replay ROUTER: send
// ["", start (8 bytes big-endian)], read [("",) topic, seq, payload] frames
// until the end marker (an empty payload) or replayIdle without a frame.
func replayAttempt(ctx context.Context, ep string, start uint64, got func(string, uint64, []byte) bool) (bool, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := zmq4.NewDealer(actx, zmq4.WithTimeout(replayIdle))
	defer d.Close()
	if err := d.Dial(ep); err != nil {
		return false, errReplayFailed // "Failed to connect replay socket": the replay fails
	}
	if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, start))); err != nil {
		return false, errReplayFailed
	}
	idle := time.AfterFunc(replayIdle, cancel)
	defer idle.Stop()
	for {
		msg, err := d.Recv()
		if err != nil {
			return false, err
		}
		idle.Reset(replayIdle)
		frames := msg.Frames
		if len(frames) > 0 && len(frames[0]) == 0 {
			frames = frames[1:]
		}
		if len(frames) == 3 && len(frames[2]) == 0 {
			return true, nil
		}
		topic, seq, payload, err := kvevents.ParseFrames(frames)
		if err != nil {
			return false, errReplayFailed
		}
		if !got(topic, seq, payload) {
			return false, nil
		}
	}
}
