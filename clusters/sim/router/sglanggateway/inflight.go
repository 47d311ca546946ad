package sglanggateway

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// inflight is the gateway's InFlightRequestTracker: every request the HTTP
// layer is handling, with its start, sampled every 20 s (the first sample
// 20 s after startup) into smg_http_inflight_request_age_count{gt,le}, one
// series per age bucket in whole seconds
// (sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/observability/inflight_tracker.rs;
// src/server.rs start_sampler(20)).
type inflight struct {
	mu     sync.Mutex
	next   uint64
	starts map[uint64]time.Time
}

// inflightSample is the sampler's period (a variable for tests).
var inflightSample = 20 * time.Second

// ageBounds are AGE_BUCKET_BOUNDS, in seconds.
var ageBounds = []int64{30, 60, 180, 300, 600, 1200, 3600, 7200, 14400, 28800, 86400}

// track records a request until the returned func is called.
func (f *inflight) track() (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.starts == nil {
		f.starts = map[uint64]time.Time{}
	}
	id := f.next
	f.next++
	f.starts[id] = time.Now()
	return func() {
		f.mu.Lock()
		delete(f.starts, id)
		f.mu.Unlock()
	}
}

// counts are the tracked requests per age bucket now (the last is +Inf).
func (f *inflight) counts(now time.Time) []int {
	out := make([]int, len(ageBounds)+1)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, start := range f.starts {
		age := int64(now.Sub(start) / time.Second)
		i := 0
		for i < len(ageBounds) && age > ageBounds[i] {
			i++
		}
		out[i]++
	}
	return out
}

// runInflightSampler sets the age gauges every inflightSample until ctx ends.
func (rt *router) runInflightSampler(ctx context.Context) {
	t := time.NewTicker(inflightSample)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for i, n := range rt.inflight.counts(now) {
				gt, le := "0", "+Inf"
				if i > 0 {
					gt = strconv.FormatInt(ageBounds[i-1], 10)
				}
				if i < len(ageBounds) {
					le = strconv.FormatInt(ageBounds[i], 10)
				}
				rt.m.inflightAge.WithLabelValues(gt, le).Set(float64(n))
			}
		}
	}
}
