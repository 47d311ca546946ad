package sglanggateway

import (
	"slices"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/router/internal/routertest"
)

// Ages count in whole seconds into non-cumulative buckets, gt < age <= le.
func TestInflightAgeBuckets(t *testing.T) {
	var f inflight
	now := time.Now()
	f.starts, f.next = map[uint64]time.Time{}, 5
	for i, age := range []time.Duration{0, 30*time.Second + 900*time.Millisecond, 31 * time.Second, 2 * time.Hour, 100000 * time.Second} {
		f.starts[uint64(i)] = now.Add(-age)
	}
	done := f.track() // a request in flight right now
	want := []int{3, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if got := f.counts(now.Add(10 * time.Millisecond)); !slices.Equal(got, want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	done()
	want[0]--
	if got := f.counts(now); !slices.Equal(got, want) {
		t.Fatalf("after the request ended: %v, want %v", got, want)
	}
}

// The sampler publishes the requests the HTTP layer holds: one held chat
// is one request of age 0..30 s; the other buckets read 0.
func TestInflightSamplerPublishesHeldRequests(t *testing.T) {
	defer func(p time.Duration) { inflightSample = p }(inflightSample)
	inflightSample = 20 * time.Millisecond
	pods := routertest.NewPods()
	es := routertest.Fleet(t, 1, pods)
	r := startSG(t, es, pods)
	release := es[0].Hold()
	done := make(chan struct{})
	go func() {
		defer close(done)
		routertest.Post(t, r.Base()+"/v1/chat/completions", routertest.Chat("m", "hi", false), nil)
	}()
	age := func(gt, le string) float64 {
		v, _ := routertest.Value(r.Metrics(t), "smg_http_inflight_request_age_count", map[string]string{"gt": gt, "le": le})
		return v
	}
	routertest.Eventually(t, 5*time.Second, func() bool { return age("0", "30") >= 1 }, "the held chat never sampled")
	if v := age("86400", "+Inf"); v != 0 {
		t.Errorf("+Inf bucket %v", v)
	}
	release()
	<-done
	routertest.Eventually(t, 5*time.Second, func() bool { return age("0", "30") == 0 }, "the answered chat still sampled")
}
