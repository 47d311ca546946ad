package report

import "testing"

func TestDisruptionAndRouterPodsRenderAsOneLine(t *testing.T) {
	d := Disruption{Claim: "killengine", Pair: "vllm-router+vLLM", Action: "killed engine Pod md-server-a",
		Requests: 40, Failed: 1, FailedBound: 3, Bound: "in flight (concurrency) + rate x fault-window",
		RecoverySeconds: 0.5, RecoveryBoundSeconds: 15, Errors: []string{"#7 transport: EOF"}}
	r := RouterPods{Claim: "routerreplicas", Pair: "vllm-router+vLLM", Title: "120 chats, a connection each",
		Pods:     []ReplicaCount{{Replica: "md-router-a", Count: 58}, {Replica: "md-router-b", Count: 62}},
		Replicas: []ReplicaCount{{Replica: "md-server-a", Count: 120}, {Replica: "md-server-b", Count: 0}}}
	for _, c := range []struct {
		e    Entry
		name string
		want string
	}{
		{d, EntryDisruption, "disruption killed engine Pod md-server-a: 1 of 40 requests failed (bound 3 = in flight (concurrency) + rate x fault-window); whole again after 0.50s (bound 15s); first: #7 transport: EOF"},
		{r, EntryRouterPods, "router Pods 120 chats, a connection each: router Pods md-router-a=58, md-router-b=62; engine replicas md-server-a=120, md-server-b=0"},
	} {
		if c.e.EntryName() != c.name {
			t.Errorf("%T.EntryName() = %s", c.e, c.e.EntryName())
		}
		re := remote(t, entry(c.e)) // as recorded on another process
		v, err := decodeKnown(re)
		if got := entryLine(re, v, err); got != c.want {
			t.Errorf("line\n got %q\nwant %q", got, c.want)
		}
	}
}

func TestKindNoteNamesWhatTheExpectationRestsOn(t *testing.T) {
	for kind, want := range map[string]string{
		"documented": "",
		"extended":   " (extended: expected outcome derived from the routers' algorithms)",
		"resilience": " (resilience: a fault injected mid-traffic; bounds derived from the routers' and the cluster's behaviour)",
	} {
		if got := kindNote(kind); got != want {
			t.Errorf("kindNote(%s) = %q, want %q", kind, got, want)
		}
	}
}
