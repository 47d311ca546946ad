package eppmetrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
)

// Each plugin call is observed in llm_d_epp_plugin_duration_seconds and in
// its legacy twin inference_extension_plugin_duration_seconds under the same
// labels (pkg/epp/metrics/metrics.go RecordPluginProcessingLatency); the
// cached observers must keep label sets apart.
func TestPluginLatencyRecordedInBothFamiliesPerLabelSet(t *testing.T) {
	r := eppmetrics.New()
	r.Plugin("Scorer", "queue-scorer", "queue-scorer", time.Millisecond)
	r.Plugin("Scorer", "queue-scorer", "queue-scorer", time.Millisecond)
	r.Plugin("Picker", "max-score-picker", "max-score-picker", time.Millisecond)
	mfs, err := r.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		var sb strings.Builder
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				sb.WriteString(l.GetName() + "=" + l.GetValue() + ",")
			}
			fmt.Fprintf(&sb, " count=%d\n", m.GetHistogram().GetSampleCount())
		}
		got[mf.GetName()] = sb.String()
	}
	want := "extension_point=Picker,plugin_name=max-score-picker,plugin_type=max-score-picker, count=1\n" +
		"extension_point=Scorer,plugin_name=queue-scorer,plugin_type=queue-scorer, count=2\n"
	for _, name := range []string{"llm_d_epp_plugin_duration_seconds", "inference_extension_plugin_duration_seconds"} {
		if got[name] != want {
			t.Errorf("%s series:\n%s\nwant:\n%s", name, got[name], want)
		}
	}
}
