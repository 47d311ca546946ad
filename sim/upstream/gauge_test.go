package upstream

import (
	"strings"
	"testing"
)

func TestFamilySamplesReadsOneFamily(t *testing.T) {
	body := []byte(`# TYPE smg_worker_cb_state gauge
smg_worker_cb_state{worker="http://10.0.0.1:8000"} 1
smg_worker_cb_state{worker="http://10.0.0.2:8000"} 0
# TYPE other_total counter
other_total 3`) // no final newline, as a body cut short has none
	got, err := familySamples("r", body, "smg_worker_cb_state")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d samples, want 2: %+v", len(got), got)
	}
	byWorker := map[string]float64{}
	for _, s := range got {
		byWorker[s.Labels["worker"]] = s.Value
	}
	if byWorker["http://10.0.0.1:8000"] != 1 || byWorker["http://10.0.0.2:8000"] != 0 {
		t.Errorf("values by worker: %v", byWorker)
	}
	if got, err := familySamples("r", body, "absent"); err != nil || len(got) != 0 {
		t.Errorf("an absent family: %v, %v; want no samples and no error", got, err)
	}
	if _, err := familySamples("r", []byte("bad{ 1\n"), "bad"); err == nil || !strings.Contains(err.Error(), "metrics from r") {
		t.Errorf("a malformed body: %v; want an error naming its source", err)
	}
}
