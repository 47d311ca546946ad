// Package kvevents is the sim's stand-in for the ZMQ PUB/SUB link between a
// vLLM engine's KV-cache event publisher (--kv-events-config, publisher
// "zmq") and llm-d's precise prefix-cache producer, which subscribes to
// tcp://<podIP>:<socketPort> of every engine Pod it discovers.
//
// What is kept from ZMQ: a publisher binds one address; a subscriber may
// connect before anything is bound there and then simply receives nothing;
// a message goes to every subscriber whose topic filter is a prefix of the
// message's topic; messages published while nobody is subscribed are
// dropped (a PUB socket does not queue for absent subscribers); each
// subscriber sees one publisher's messages in publish order. What is not:
// the wire (msgpack over TCP), the replay socket, high-water marks.
// Delivery is synchronous, in the publisher's goroutine.
//
// The topic is sent verbatim, as vLLM's ZmqEventPublisher sends
// KVEventsConfig.topic (vllm-project/vllm@0181ea31:vllm/distributed/kv_events.py,
// _topic_bytes); the consumer decides what it means.
package kvevents

import (
	"fmt"
	"strings"
	"sync"
)

// Kind is a KV-cache event type (vLLM's BlockStored, BlockRemoved,
// AllBlocksCleared).
type Kind int

// The event kinds.
const (
	BlockStored Kind = iota
	BlockRemoved
	AllBlocksCleared
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
}

// Batch is one published message: the topic frame and an event batch.
type Batch struct {
	Topic  string
	Events []Event
}

// Bus connects publishers and subscribers by address ("ip:port"). The zero
// value is not usable; use NewBus.
type Bus struct {
	mu   sync.Mutex
	pubs map[string]*Publisher
	subs map[string]map[*subscription]struct{}
}

type subscription struct {
	filter  string
	deliver func(Batch)
	// mu orders deliveries to this subscriber and lets cancel wait out an
	// in-flight one.
	mu     sync.Mutex
	closed bool
}

// NewBus returns an empty bus.
func NewBus() *Bus {
	return &Bus{pubs: map[string]*Publisher{}, subs: map[string]map[*subscription]struct{}{}}
}

// Publisher is a bound PUB socket.
type Publisher struct {
	bus  *Bus
	addr string
}

// Bind binds addr ("ip:port"). Binding an address already bound fails as
// zmq_bind does (EADDRINUSE).
func (b *Bus) Bind(addr string) (*Publisher, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, taken := b.pubs[addr]; taken {
		return nil, fmt.Errorf("zmq bind tcp://%s: Address already in use", addr)
	}
	p := &Publisher{bus: b, addr: addr}
	b.pubs[addr] = p
	return p, nil
}

// Publish sends one batch to every current subscriber of the address whose
// filter is a prefix of the batch's topic.
func (p *Publisher) Publish(batch Batch) {
	if p == nil {
		return
	}
	b := p.bus
	b.mu.Lock()
	if b.pubs[p.addr] != p {
		b.mu.Unlock()
		return
	}
	var to []*subscription
	for s := range b.subs[p.addr] {
		if strings.HasPrefix(batch.Topic, s.filter) {
			to = append(to, s)
		}
	}
	b.mu.Unlock()
	for _, s := range to {
		s.mu.Lock()
		if !s.closed {
			s.deliver(batch)
		}
		s.mu.Unlock()
	}
}

// Close unbinds the address (the engine process ended).
func (p *Publisher) Close() {
	if p == nil {
		return
	}
	p.bus.mu.Lock()
	if p.bus.pubs[p.addr] == p {
		delete(p.bus.pubs, p.addr)
	}
	p.bus.mu.Unlock()
}

// Subscribe connects a SUB socket to addr with a topic-prefix filter. It
// may be called before anything binds addr. cancel disconnects and returns
// once no delivery to this subscriber is in progress.
func (b *Bus) Subscribe(addr, filter string, deliver func(Batch)) (cancel func()) {
	s := &subscription{filter: filter, deliver: deliver}
	b.mu.Lock()
	if b.subs[addr] == nil {
		b.subs[addr] = map[*subscription]struct{}{}
	}
	b.subs[addr][s] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs[addr], s)
			if len(b.subs[addr]) == 0 {
				delete(b.subs, addr)
			}
			b.mu.Unlock()
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
		})
	}
}
