package extproc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpustack/routing-conformance/clusters/sim/router/llmd/extproc"
)

type proc struct{}

func (proc) Open(context.Context) extproc.Stream { return nil }

func TestDialReachesOnlyAListeningProcessor(t *testing.T) {
	n := extproc.NewNetwork()
	if _, err := n.Dial("10.0.0.1:9002"); !errors.Is(err, extproc.ErrUnavailable) {
		t.Fatalf("nothing listens: %v", err)
	}
	stop, err := n.Listen("10.0.0.1:9002", proc{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("10.0.0.1:9002", proc{}); err == nil {
		t.Fatal("a second listener on one address is refused")
	}
	if p, err := n.Dial("10.0.0.1:9002"); err != nil || p == nil {
		t.Fatalf("%v %v", p, err)
	}
	stop()
	if _, err := n.Dial("10.0.0.1:9002"); !errors.Is(err, extproc.ErrUnavailable) {
		t.Fatal("a stopped EPP refuses connections")
	}
}
