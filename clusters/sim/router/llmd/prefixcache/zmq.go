package prefixcache

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/gpustack/routing-conformance/clusters/sim/kvevents"
)

// zmqRetry is how long the subscriber waits before dialling again after its
// socket failed (retryInterval in llm-d/llm-d-kv-cache@7be76e11:pkg/kvevents/zmq_subscriber.go).
var zmqRetry = 5 * time.Second

// ZMQSource subscribes over real ZMQ, as llm-d-kv-cache's zmqSubscriber
// does for each discovered Pod: a SUB socket (zmq4, no automatic
// reconnect) dialled to tcp://<pod IP>:<socketPort>, subscribed to the
// topic filter, each message split into topic, sequence and payload, the
// payload decoded as vLLM's KVEventBatch. Malformed messages are dropped, as
// there; sequence gaps are not acted on (the real subscriber does not use
// the replay socket either).
type ZMQSource struct{}

// Subscribe implements KVEventSource. cancel closes the socket and returns
// once no delivery is in progress.
func (ZMQSource) Subscribe(s Subscriber, deliver func(KVEvent)) (cancel func()) {
	ctx, stop := context.WithCancel(context.Background())
	ep := "tcp://" + net.JoinHostPort(s.Address, strconv.Itoa(s.SocketPort))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			subscribeOnce(ctx, ep, s.TopicFilter, deliver)
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

// subscribeOnce runs one socket until it fails or ctx ends.
func subscribeOnce(ctx context.Context, ep, filter string, deliver func(KVEvent)) {
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if sub.Dial(ep) != nil || sub.SetOption(zmq4.OptionSubscribe, filter) != nil {
		return
	}
	for {
		msg, err := sub.Recv()
		if err != nil {
			return
		}
		topic, _, payload, err := kvevents.ParseFrames(msg.Frames)
		if err != nil {
			continue
		}
		batch, err := kvevents.Decode(payload)
		if err != nil {
			continue
		}
		for _, ev := range batch.Events {
			if ctx.Err() != nil {
				return
			}
			deliver(KVEvent{Topic: topic, Kind: kinds[ev.Kind], BlockHashes: ev.BlockHashes,
				ParentBlockHash: ev.ParentBlockHash, TokenIDs: ev.TokenIDs, BlockSize: ev.BlockSize})
		}
	}
}

var kinds = map[kvevents.Kind]KVEventKind{
	kvevents.BlockStored:      BlockStored,
	kvevents.BlockRemoved:     BlockRemoved,
	kvevents.AllBlocksCleared: AllBlocksCleared,
}
