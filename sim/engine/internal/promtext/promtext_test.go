package promtext

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestPythonFloatFormatting(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {16, "16.0"}, {0.001, "0.001"}, {2560, "2560.0"},
		{0.0001, "0.0001"}, {0.00001, "1e-05"}, {123456, "123456.0"},
		{1234567, "1.234567e+06"}, {1700000000.5, "1.7000000005e+09"},
		{1e16, "1e+16"}, {0.25, "0.25"}, {-3, "-3.0"},
	} {
		if got := pyFloat(tc.in); got != tc.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func gather(t *testing.T, reg *prometheus.Registry) []byte {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return Append(nil, fams, Style{DefaultOrder: []string{"model_name", "engine"}})
}

func TestSingleProcessLayoutMatchesPrometheusClient(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prompt_tokens_total", Help: "Number of prefill tokens processed."}, []string{"model_name", "engine"})
	reg.MustRegister(c)
	c.WithLabelValues("m", "0").Add(16)
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", Buckets: []float64{0.001, 1}}, []string{"model_name", "engine"})
	reg.MustRegister(h)
	h.WithLabelValues("m", "0").Observe(0.5)
	out := string(gather(t, reg))

	for _, want := range []string{
		"# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n# TYPE vllm:prompt_tokens_total counter\n" +
			`vllm:prompt_tokens_total{model_name="m",engine="0"} 16.0` + "\n" +
			"# HELP vllm:prompt_tokens_created Number of prefill tokens processed.\n# TYPE vllm:prompt_tokens_created gauge\n" +
			`vllm:prompt_tokens_created{model_name="m",engine="0"} `,
		`vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="0.001"} 0.0` + "\n" +
			`vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="1.0"} 1.0` + "\n" +
			`vllm:time_to_first_token_seconds_bucket{model_name="m",engine="0",le="+Inf"} 1.0` + "\n" +
			`vllm:time_to_first_token_seconds_count{model_name="m",engine="0"} 1.0` + "\n" +
			`vllm:time_to_first_token_seconds_sum{model_name="m",engine="0"} 0.5` + "\n" +
			"# HELP vllm:time_to_first_token_seconds_created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks\n%s\n--- output:\n%s", want, out)
		}
	}
	// Go's own parser must accept it (the assertions package uses expfmt).
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader([]byte(out)))
	if err != nil {
		t.Fatalf("expfmt rejects the output: %v\n%s", err, out)
	}
	if got := fams["vllm:prompt_tokens_total"].GetMetric()[0].GetCounter().GetValue(); got != 16 {
		t.Fatalf("parsed counter = %v", got)
	}
}

func TestMultiprocessLayoutHasSortedLabelsSumFirstAndNoCreated(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sglang:e2e_request_latency_seconds", Help: "Histogram of End-to-end request latency in seconds", Buckets: []float64{0.1}}, []string{"model_name", "engine_type"})
	reg.MustRegister(h)
	h.WithLabelValues("m", "unified").Observe(0.05)
	fams, _ := reg.Gather()
	out := string(Append(nil, fams, Style{Multiprocess: true}))
	want := `sglang:e2e_request_latency_seconds_sum{engine_type="unified",model_name="m"} 0.05` + "\n" +
		`sglang:e2e_request_latency_seconds_bucket{engine_type="unified",model_name="m",le="0.1"} 1.0` + "\n" +
		`sglang:e2e_request_latency_seconds_bucket{engine_type="unified",model_name="m",le="+Inf"} 1.0` + "\n" +
		`sglang:e2e_request_latency_seconds_count{engine_type="unified",model_name="m"} 1.0` + "\n"
	if !strings.Contains(out, want) {
		t.Fatalf("output lacks\n%s\n--- output:\n%s", want, out)
	}
	if strings.Contains(out, "_created") {
		t.Fatalf("multiprocess output has _created:\n%s", out)
	}
}

func TestEmptyVecFamiliesAreOmitted(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sglang:cached_tokens_total", Help: "x"}, []string{"model_name"}))
	if out := gather(t, reg); len(out) != 0 {
		t.Fatalf("empty family written: %q", out)
	}
}

func TestLabelValuesAreEscaped(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x", Help: "a\\b\nc"}, []string{"v"})
	reg.MustRegister(g)
	g.WithLabelValues("q\"\\\n").Set(1)
	out := string(gather(t, reg))
	if !strings.Contains(out, `x{v="q\"\\\n"} 1.0`) || !strings.Contains(out, `# HELP x a\\b\nc`) {
		t.Fatalf("bad escaping:\n%s", out)
	}
}

type failingGatherer struct{}

func (failingGatherer) Gather() ([]*dto.MetricFamily, error) {
	return nil, errors.New("collector broke")
}

func TestServeWritesOneScrapeWithPythonContentType(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "X."})
	reg.MustRegister(c)
	c.Add(2)
	rec := httptest.NewRecorder()
	Serve(rec, reg, Style{Multiprocess: true})
	if rec.Code != 200 || rec.Header().Get("Content-Type") != ContentType || rec.Body.String() != "# HELP x_total X.\n# TYPE x_total counter\nx_total 2.0\n" {
		t.Fatalf("got %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	rec = httptest.NewRecorder()
	Serve(rec, failingGatherer{}, Style{})
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "collector broke") {
		t.Fatalf("gather error answered %d %q", rec.Code, rec.Body.String())
	}
}
