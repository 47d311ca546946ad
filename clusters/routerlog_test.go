package clusters

import (
	"context"
	"errors"
	"testing"
	"time"
)

// hungRouter answers nothing until its caller gives up.
type hungRouter struct{}

func (hungRouter) RouterState(ctx context.Context) ([]RouterPod, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungRouter) RouterLogs(ctx context.Context, _ LogOptions) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// A target that cannot be read (an API server that is down) holds a failed
// wait's error up by at most a second, and adds nothing to it.
func TestWithRouterLogIsBounded(t *testing.T) {
	failed := errors.New("not Ready")
	start := time.Now()
	err := withRouterLog(failed, hungRouter{})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("withRouterLog took %s on a target that does not answer", took)
	}
	if err != failed {
		t.Errorf("err = %v, want the wait's error unchanged", err)
	}
	if withRouterLog(nil, hungRouter{}) != nil {
		t.Error("a wait that succeeded gained an error")
	}
}
