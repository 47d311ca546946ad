package clusters_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/clusters"
)

// hungDeployment answers nothing until its caller gives up.
type hungDeployment struct{ clusters.Deployment }

func (hungDeployment) RouterState(ctx context.Context) ([]clusters.RouterPod, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A target that cannot be read (an API server that is down) holds a failed
// wait's error up by at most a second, and adds nothing to it.
func TestWithRouterLogIsBounded(t *testing.T) {
	failed := errors.New("not Ready")
	start := time.Now()
	err := clusters.WithRouterLog(failed, hungDeployment{})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("WithRouterLog took %s on a target that does not answer", took)
	}
	if err != failed {
		t.Errorf("err = %v, want the wait's error unchanged", err)
	}
	if clusters.WithRouterLog(nil, hungDeployment{}) != nil {
		t.Error("a wait that succeeded gained an error")
	}
}
