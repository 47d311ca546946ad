package routerbase

// The routers' metrics exporter: metrics-exporter-prometheus's HTTP listener
// answers every path with the text exposition and only /health with "OK"
// (docs/routers.md#exporter). It also holds the conventions both routers need
// from client_golang: one registry per process, and series that exist only
// after their first record.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// DurationBuckets are the buckets both routers set for "*duration_seconds".
var DurationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 240.0}

// SummaryObjectives are the exporter's default quantiles for histograms it
// renders as summaries (names not ending in duration_seconds).
var SummaryObjectives = map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.95: 0.005, 0.99: 0.001, 0.999: 0.0001, 1: 0.0001}

// metricsHandler renders reg in the text format on every path but /health,
// without HELP lines: both routers' start_prometheus describes their
// metrics (init_metrics) before PrometheusBuilder::install sets the global
// recorder, so every description goes to the metrics crate's no-op
// recorder and the exporter knows none (vllm-project/router@v0.1.15:src/metrics.rs
// and sgl-project/sglang@gateway-v0.3.1:sgl-model-gateway/src/observability/metrics.rs,
// start_prometheus; seen on both wheels' /metrics). The help texts the
// series are registered with are the source's describe_* texts, kept as
// documentation.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			_, _ = w.Write([]byte("OK"))
			return
		}
		mfs, err := reg.Gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, mf := range mfs {
			mf.Help = nil
			if err := enc.Encode(mf); err != nil {
				return
			}
		}
	})
}

// serveMetrics runs the exporter on ln until ctx is done.
func serveMetrics(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Gauge is a gauge without labels that is exposed only once set (a GaugeVec
// with no label names has no series until its child is first touched).
type Gauge struct{ v *prometheus.GaugeVec }

// NewGauge registers a lazily exposed gauge.
func NewGauge(reg *prometheus.Registry, name, help string) *Gauge {
	g := &Gauge{v: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, nil)}
	reg.MustRegister(g.v)
	return g
}

// Set sets the gauge (creating the series).
func (g *Gauge) Set(v float64) { g.v.WithLabelValues().Set(v) }

// Counter is a counter without labels exposed only once incremented.
type Counter struct{ v *prometheus.CounterVec }

// NewCounter registers a lazily exposed counter.
func NewCounter(reg *prometheus.Registry, name, help string) *Counter {
	c := &Counter{v: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, nil)}
	reg.MustRegister(c.v)
	return c
}

// Inc increments the counter (creating the series).
func (c *Counter) Inc() { c.v.WithLabelValues().Inc() }

// Histogram is a histogram without labels exposed only once observed.
type Histogram struct{ v *prometheus.HistogramVec }

// NewHistogram registers a lazily exposed duration histogram.
func NewHistogram(reg *prometheus.Registry, name, help string) *Histogram {
	h := &Histogram{v: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: DurationBuckets}, nil)}
	reg.MustRegister(h.v)
	return h
}

// Observe records one value.
func (h *Histogram) Observe(v float64) { h.v.WithLabelValues().Observe(v) }

// CounterVec, GaugeVec, HistogramVec and SummaryVec register the labelled
// kinds (client_golang already exposes a labelled series only once used).
func CounterVec(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	reg.MustRegister(v)
	return v
}

func GaugeVec(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	reg.MustRegister(v)
	return v
}

func HistogramVec(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: DurationBuckets}, labels)
	reg.MustRegister(v)
	return v
}

func SummaryVec(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.SummaryVec {
	v := prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: name, Help: help, Objectives: SummaryObjectives}, labels)
	reg.MustRegister(v)
	return v
}
