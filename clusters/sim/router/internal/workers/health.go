package workers

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// HealthConfig is --health-check-* (both routers).
type HealthConfig struct {
	Interval         time.Duration
	Timeout          time.Duration
	Endpoint         string
	FailureThreshold int
	SuccessThreshold int
}

// RunHealthChecks probes every registered worker each Interval until ctx is
// done, feeding the results to the thresholds; onChange is told about every
// health flip (the router updates its gauges and logs).
func RunHealthChecks(ctx context.Context, reg *Registry, cfg HealthConfig, client *http.Client, onChange func(w *Worker, healthy bool)) {
	if cfg.Interval <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, w := range reg.All() {
			wg.Add(1)
			go func(w *Worker) {
				defer wg.Done()
				ok := Probe(ctx, client, w.URL()+cfg.Endpoint, cfg.Timeout)
				if ctx.Err() != nil {
					return
				}
				if w.HealthResult(ok, cfg.FailureThreshold, cfg.SuccessThreshold) {
					reg.Bump()
					if onChange != nil {
						onChange(w, w.Healthy())
					}
				}
			}(w)
		}
		wg.Wait()
	}
}

// Probe GETs url and reports a 2xx answer within timeout.
func Probe(ctx context.Context, client *http.Client, url string, timeout time.Duration) bool {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !strings.HasPrefix(url, "http") {
		return false
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}
