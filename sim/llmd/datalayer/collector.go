package datalayer

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/gpustack/routing-conformance/sim/llmd/eppmetrics"
	"github.com/gpustack/routing-conformance/sim/llmd/framework"
)

// Collectors runs one scrape loop per endpoint (datalayer/collector.go):
// on every tick of --refresh-metrics-interval (or the source's own
// interval) the source is polled and the extractors update the endpoint.
// A poll that fails counts in *_datalayer_poll_errors_total; an extraction
// with missing families counts in *_datalayer_extract_errors_total. Ticks
// that arrive while a poll is running are dropped, as with time.Ticker.
type Collectors struct {
	ctx      context.Context
	interval time.Duration
	source   *Source
	extract  []*Extractor
	metrics  *eppmetrics.Registry
	now      func() time.Time

	mu    sync.Mutex
	stops map[*Endpoint]context.CancelFunc
	wg    sync.WaitGroup
}

// NewCollectors scrapes with source and extractors every interval.
func NewCollectors(ctx context.Context, interval time.Duration, source *Source, extract []*Extractor, m *eppmetrics.Registry) *Collectors {
	if source != nil && source.Interval > 0 {
		interval = source.Interval
	}
	return &Collectors{ctx: ctx, interval: interval, source: source, extract: extract, metrics: m,
		now: time.Now, stops: map[*Endpoint]context.CancelFunc{}}
}

// Added starts e's loop (Hooks).
func (c *Collectors) Added(e *Endpoint) {
	if c.source == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	c.stops[e] = cancel
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(ctx, e)
	}()
}

// Removed stops e's loop (Hooks).
func (c *Collectors) Removed(e *Endpoint) {
	c.mu.Lock()
	cancel := c.stops[e]
	delete(c.stops, e)
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Wait blocks until every loop has ended (after ctx is cancelled).
func (c *Collectors) Wait() { c.wg.Wait() }

func (c *Collectors) run(ctx context.Context, e *Endpoint) {
	framework.Every(ctx, c.interval, func() { c.Scrape(ctx, e) })
}

// Scrape polls e once and applies the extractors.
func (c *Collectors) Scrape(ctx context.Context, e *Endpoint) {
	fams, err := c.source.Poll(ctx, e.Meta)
	if err != nil {
		if ctx.Err() == nil {
			c.metrics.PollError(SourceType)
		}
		return
	}
	cur := e.Metrics()
	for _, x := range c.extract {
		next, updated, err := x.Extract(fams, e.Meta.Labels, cur, c.now())
		if err != nil {
			c.metrics.ExtractError(SourceType, ExtractorType)
		}
		if updated {
			cur = next
			e.SetMetrics(cur)
		}
	}
}

// Fresh reports whether m was extracted within threshold of now
// (podsWithFreshMetrics).
func Fresh(m framework.Metrics, now time.Time, threshold time.Duration) bool {
	return now.Sub(m.UpdateTime) <= threshold
}

// Summarize is calculateSummary over the fresh endpoints: means, and the
// sample standard deviation (n-1, at least 1), rounded to two decimals.
func Summarize(ms []framework.Metrics) eppmetrics.PoolSummary {
	s := eppmetrics.PoolSummary{Ready: len(ms)}
	if len(ms) == 0 {
		return s
	}
	n := float64(len(ms))
	var kv, q, r float64
	for _, m := range ms {
		kv += m.KVCacheUsagePercent
		q += float64(m.WaitingQueueSize)
		r += float64(m.RunningRequestsSize)
	}
	s.AvgKV, s.AvgQueue, s.AvgRunning = kv/n, q/n, r/n
	var kvss, qss, rss float64
	for _, m := range ms {
		kvss += (m.KVCacheUsagePercent - s.AvgKV) * (m.KVCacheUsagePercent - s.AvgKV)
		qss += (float64(m.WaitingQueueSize) - s.AvgQueue) * (float64(m.WaitingQueueSize) - s.AvgQueue)
		rss += (float64(m.RunningRequestsSize) - s.AvgRunning) * (float64(m.RunningRequestsSize) - s.AvgRunning)
	}
	d := math.Max(1, n-1)
	s.AvgKV, s.AvgQueue, s.AvgRunning = round2(s.AvgKV), round2(s.AvgQueue), round2(s.AvgRunning)
	s.StdKV, s.StdQueue, s.StdRunning = round2(math.Sqrt(kvss/d)), round2(math.Sqrt(qss/d)), round2(math.Sqrt(rss/d))
	return s
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// RunRefresher records the pool gauges every interval
// (runPrometheusRefresher): ready endpoints are those with fresh metrics.
func RunRefresher(ctx context.Context, ds *Datastore, m *eppmetrics.Registry, interval, staleness time.Duration, now func() time.Time) {
	framework.Every(ctx, interval, func() { RefreshOnce(ds, m, staleness, now()) })
}

// RefreshOnce is one refreshPrometheusMetrics pass.
func RefreshOnce(ds *Datastore, m *eppmetrics.Registry, staleness time.Duration, now time.Time) {
	var fresh []framework.Metrics
	for _, e := range ds.List() {
		if em := e.Metrics(); Fresh(em, now, staleness) {
			fresh = append(fresh, em)
		}
	}
	m.Pool(ds.Pool().Name, Summarize(fresh))
}
