package vllm

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/gpustack/routing-conformance/clusters/sim/kvevents"
)

// Deps is what the vllm program needs from the sim around it.
type Deps struct {
	// KVEvents is where a publisher configured by --kv-events-config binds;
	// nil publishes nowhere (the socket has no subscriber).
	KVEvents *kvevents.Bus
}

// kvEventsConfig is the subset of vLLM's KVEventsConfig the sim reads
// (vllm/config/kv_events.py; defaults: events off, the null publisher,
// endpoint tcp://*:5557, topic "").
type kvEventsConfig struct {
	Enable    bool   `json:"enable_kv_cache_events"`
	Publisher string `json:"publisher"`
	Endpoint  string `json:"endpoint"`
	Topic     string `json:"topic"`
}

// startKVEvents binds the ZMQ publisher --kv-events-config asks for on bus,
// at the Pod's own address. It returns nil (and no error) when events are
// off, the publisher is not zmq, no bus is given, or the endpoint connects
// rather than binds (vLLM binds only an endpoint with a wildcard host; a
// connecting publisher reaches whatever listens there, which in the sim is
// nothing).
func startKVEvents(raw, podIP string, bus *kvevents.Bus) (*blockPublisher, error) {
	if raw == "" || bus == nil {
		return nil, nil
	}
	cfg := kvEventsConfig{Publisher: "null", Endpoint: "tcp://*:5557"}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return nil, fmt.Errorf("--kv-events-config: %w", err)
	}
	if !cfg.Enable || cfg.Publisher != "zmq" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(cfg.Endpoint, "tcp://")
	if !ok {
		return nil, nil
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return nil, fmt.Errorf("--kv-events-config endpoint %q: %w", cfg.Endpoint, err)
	}
	if host != "*" && host != "0.0.0.0" && host != "::" {
		return nil, nil
	}
	pub, err := bus.Bind(net.JoinHostPort(podIP, port))
	if err != nil {
		return nil, err
	}
	return &blockPublisher{pub: pub, topic: cfg.Topic}, nil
}

// blockPublisher turns the prefix cache's block events into published
// batches, one event per batch (vLLM batches per engine step; the sim's
// steps are the cache's inserts).
type blockPublisher struct {
	pub   *kvevents.Publisher
	topic string
}

func (p *blockPublisher) Stored(parent *uint64, hashes []uint64, tokens []uint32, blockSize int) {
	ev := kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: append([]uint64(nil), hashes...),
		TokenIDs: append([]uint32(nil), tokens...), BlockSize: blockSize}
	if parent != nil {
		h := *parent
		ev.ParentBlockHash = &h
	}
	p.pub.Publish(kvevents.Batch{Topic: p.topic, Events: []kvevents.Event{ev}})
}

func (p *blockPublisher) Removed(hashes []uint64) {
	p.pub.Publish(kvevents.Batch{Topic: p.topic, Events: []kvevents.Event{{Kind: kvevents.BlockRemoved,
		BlockHashes: append([]uint64(nil), hashes...)}}})
}

func (p *blockPublisher) Cleared() {
	p.pub.Publish(kvevents.Batch{Topic: p.topic, Events: []kvevents.Event{{Kind: kvevents.AllBlocksCleared}}})
}

func (p *blockPublisher) close() {
	if p != nil {
		p.pub.Close()
	}
}
