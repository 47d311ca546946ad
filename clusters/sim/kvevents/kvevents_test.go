package kvevents

import (
	"strings"
	"testing"
)

func TestBusFollowsZMQPubSub(t *testing.T) {
	b := NewBus()
	var got []string
	// A SUB may connect before the PUB binds.
	cancel := b.Subscribe("10.0.0.1:5557", "kv@", func(m Batch) { got = append(got, m.Topic) })
	var other []string
	defer b.Subscribe("10.0.0.1:5557", "xx", func(m Batch) { other = append(other, m.Topic) })()
	defer b.Subscribe("10.0.0.2:5557", "", func(m Batch) { other = append(other, "wrong address") })()

	pub, err := b.Bind("10.0.0.1:5557")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Bind("10.0.0.1:5557"); err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("second bind: %v", err)
	}
	pub.Publish(Batch{Topic: "kv@"})
	pub.Publish(Batch{Topic: "kv@10.0.0.1@m"})
	pub.Publish(Batch{Topic: "other"})
	if strings.Join(got, ",") != "kv@,kv@10.0.0.1@m" {
		t.Fatalf("prefix-filtered, in order: %v", got)
	}
	if len(other) != 0 {
		t.Fatalf("other filter or address received %v", other)
	}
	cancel()
	pub.Publish(Batch{Topic: "kv@"})
	if len(got) != 2 {
		t.Fatalf("delivered after cancel: %v", got)
	}
	pub.Close()
	if _, err := b.Bind("10.0.0.1:5557"); err != nil {
		t.Fatalf("bind after close: %v", err)
	}
	pub.Publish(Batch{Topic: "kv@"}) // a closed publisher sends nothing, not even to a rebound address
}
