package framework

import (
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/config"
)

// The kube target polls and bounds its deletions with the config's
// default/wait-deleted interval, not its own 5 s default.
func TestKubeOptionsCarryTheWaitDeletedInterval(t *testing.T) {
	cfg := config.Default()
	cfg.Target = config.TargetKube
	cfg.Intervals[config.SpecDefault+"/"+config.OpWaitDeleted] = config.Interval{
		Timeout: config.Duration(90 * time.Second), Poll: config.Duration(250 * time.Millisecond)}
	iv := kubeOptions(cfg, shared{RunID: "r"}).Intervals
	if iv.Poll != 250*time.Millisecond || iv.Delete != 90*time.Second {
		t.Errorf("kube intervals %+v, want poll 250ms and delete 90s from default/wait-deleted", iv)
	}
}
