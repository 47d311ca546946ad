package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/gpustack/routing-conformance/sim/kvevents"
	"github.com/gpustack/routing-conformance/sim/proc"
)

// kvEventsConfig is the subset of vLLM's KVEventsConfig the sim reads, with
// its defaults (vllm-project/vllm@98dff2a81:vllm/config/kv_events.py: events
// off, publisher "zmq" when they are on, endpoint tcp://*:5557, no replay
// endpoint, buffer_steps 10000, hwm 100000, topic "").
type kvEventsConfig struct {
	Enable         bool    `json:"enable_kv_cache_events"`
	Publisher      *string `json:"publisher"`
	Endpoint       string  `json:"endpoint"`
	ReplayEndpoint *string `json:"replay_endpoint"`
	BufferSteps    int     `json:"buffer_steps"`
	HWM            int     `json:"hwm"`
	Topic          string  `json:"topic"`
}

// startKVEvents starts the ZmqEventPublisher --kv-events-config asks for
// (vllm-project/vllm@98dff2a81:vllm/distributed/kv_events.py): a PUB socket
// and, with replay_endpoint, a ROUTER socket, both bound through the
// container (a wildcard host is the Pod's own address). It returns nil (and
// no error) when events are off, the publisher is not zmq, or the endpoint
// connects rather than binds: vLLM binds only an endpoint containing "*" or
// "::"; a connecting publisher reaches whatever listens there, which in the
// sim is nothing.
func startKVEvents(raw string, c *proc.Container) (*zmqPublisher, error) {
	if raw == "" {
		return nil, nil
	}
	cfg := kvEventsConfig{Endpoint: "tcp://*:5557", BufferSteps: kvevents.ReplayBuffer, HWM: 100_000}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return nil, fmt.Errorf("--kv-events-config: %w", err)
	}
	publisher := "null"
	if cfg.Publisher != nil {
		publisher = *cfg.Publisher
	} else if cfg.Enable {
		publisher = "zmq"
	}
	if !cfg.Enable || publisher != "zmq" {
		return nil, nil
	}
	if !strings.Contains(cfg.Endpoint, "*") && !strings.Contains(cfg.Endpoint, "::") {
		return nil, nil
	}
	p := &zmqPublisher{topic: cfg.Topic, ring: make([]buffered, 0, min(max(cfg.BufferSteps, 0), 1024)),
		steps: max(cfg.BufferSteps, 0)}
	p.pub = zmq4.NewPub(context.Background())
	if err := p.pub.SetOption(zmq4.OptionHWM, cfg.HWM); err != nil {
		closePub(p.pub)
		return nil, err
	}
	if err := bind(c, p.pub, cfg.Endpoint); err != nil {
		closePub(p.pub)
		return nil, err
	}
	if cfg.ReplayEndpoint != nil {
		p.replay = zmq4.NewRouter(context.Background())
		if err := bind(c, p.replay, *cfg.ReplayEndpoint); err != nil {
			p.close()
			return nil, err
		}
		p.wg.Add(1)
		go p.serveReplay()
	}
	// A killed container's Main may not return at once; its listeners are
	// closed under the sockets, whose accept loops would then spin.
	p.done = make(chan struct{})
	go func() {
		select {
		case <-c.Killed:
			p.close()
		case <-p.done:
		}
	}()
	return p, nil
}

// bind binds sck at a tcp:// endpoint through the container's Listen, so
// the kubelet tracks the port like the API server's.
func bind(c *proc.Container, sck zmq4.Socket, endpoint string) error {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return fmt.Errorf("ZMQError: Protocol not supported (addr='%s')", endpoint)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return fmt.Errorf("ZMQError: Invalid argument (addr='%s')", endpoint)
	}
	if host == "*" {
		host = ""
	}
	ln, err := c.Listen(net.JoinHostPort(host, port))
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("ZMQError: Address already in use (addr='%s')", endpoint)
	}
	if err != nil {
		return fmt.Errorf("ZMQError: %v (addr='%s')", err, endpoint)
	}
	return held.listen(sck, ln)
}

// zmqPublisher publishes the prefix cache's block events, one event per
// batch (vLLM batches per engine step; the sim's steps are the cache's
// inserts), numbering messages from 0 and keeping the last buffer_steps for
// replay. zmq4's PUB queues sends, so publishing does not block the engine
// (vLLM hands batches to a publisher thread for the same reason).
type zmqPublisher struct {
	topic  string
	pub    zmq4.Socket
	replay zmq4.Socket
	wg     sync.WaitGroup
	done   chan struct{} // closed by close

	mu     sync.Mutex
	closed bool
	seq    uint64
	steps  int
	ring   []buffered // the last steps messages, oldest at head
	head   int
}

type buffered struct {
	seq     uint64
	payload []byte
}

func (p *zmqPublisher) Stored(parent *uint64, hashes []uint64, tokens []uint32, blockSize int) {
	p.publish(kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: hashes, ParentBlockHash: parent,
		TokenIDs: tokens, BlockSize: blockSize})
}

func (p *zmqPublisher) Removed(hashes []uint64) {
	p.publish(kvevents.Event{Kind: kvevents.BlockRemoved, BlockHashes: hashes})
}

func (p *zmqPublisher) Cleared() { p.publish(kvevents.Event{Kind: kvevents.AllBlocksCleared}) }

func (p *zmqPublisher) publish(ev kvevents.Event) {
	ts := float64(time.Now().UnixNano()) / 1e9
	payload, err := kvevents.Encode(kvevents.Batch{TS: ts, Events: []kvevents.Event{ev}})
	if err != nil {
		return // vLLM logs the exception and goes on
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	seq := p.seq
	p.seq++
	_ = p.pub.Send(zmq4.NewMsgFrom(kvevents.Frames(p.topic, seq, payload)...))
	if p.steps == 0 {
		return
	}
	if len(p.ring) < p.steps {
		p.ring = append(p.ring, buffered{seq, payload})
		return
	}
	p.ring[p.head] = buffered{seq, payload}
	p.head = (p.head + 1) % p.steps
}

// serveReplay answers replay requests as ZmqEventPublisher._service_replay
// does: a request is [identity, empty, start sequence (big-endian)]; the
// answer is every buffered message from that sequence on, each [identity,
// empty, topic, sequence, payload], then [identity, empty, empty, -1,
// empty] (vllm-project/vllm@98dff2a81:vllm/distributed/kv_events.py: the
// subscriber receives what it receives from the PUB, topic first; earlier
// vLLM sent no topic, which llm-d-router v0.10.0's replay client refuses).
func (p *zmqPublisher) serveReplay() {
	defer p.wg.Done()
	for {
		req, err := p.replay.Recv()
		if err != nil {
			return // closed
		}
		if len(req.Frames) != 3 {
			continue // vLLM logs "Invalid replay request"
		}
		id, start := req.Frames[0], beUint(req.Frames[2])
		for _, m := range p.since(start) {
			if p.replay.Send(zmq4.NewMsgFrom(append([][]byte{id, nil}, kvevents.Frames(p.topic, m.seq, m.payload)...)...)) != nil {
				break
			}
		}
		_ = p.replay.Send(zmq4.NewMsgFrom(id, nil, nil, kvevents.EndSeq, nil))
	}
}

// since returns the buffered messages with a sequence number ≥ start.
func (p *zmqPublisher) since(start uint64) []buffered {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []buffered
	for i := range p.ring {
		m := p.ring[(p.head+i)%len(p.ring)]
		if m.seq >= start {
			out = append(out, m)
		}
	}
	return out
}

// beUint is Python's int.from_bytes(b, "big"), saturated at 2^64-1 (no
// sequence number reaches it).
func beUint(b []byte) uint64 {
	var n uint64
	for _, x := range b {
		if n>>56 != 0 {
			return math.MaxUint64
		}
		n = n<<8 | uint64(x)
	}
	return n
}

// close shuts both sockets (the engine process ended); publishing after it
// does nothing.
func (p *zmqPublisher) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return
	}
	if p.done != nil {
		close(p.done)
	}
	closePub(p.pub)
	if p.replay != nil {
		_ = p.replay.Close()
	}
	p.wg.Wait()
}

// closePub closes a zmq4 PUB socket. One goroutine of it outlives Close in
// zmq4 v0.17.0: socket.Close never closes the PUB's writer pool, so
// pubMWriter.run waits on its condition for ever (about 2 KiB per engine
// that published; tests ignore that one frame by name).
func closePub(pub zmq4.Socket) { _ = pub.Close() }
