package upstream

import (
	"bytes"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one series of a family the observers read: its labels and value.
type sample struct {
	Labels map[string]string
	Value  float64
}

// familySamples reads family's series from a Prometheus text body, with
// prometheus/common's parser (the suite's metrics package is the specs',
// not the sim's). A body without the family has none.
func familySamples(source string, body []byte, family string) ([]sample, error) {
	if len(body) > 0 && body[len(body)-1] != '\n' {
		body = append(append(make([]byte, 0, len(body)+1), body...), '\n')
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("metrics from %s: %w", source, err)
	}
	mf, ok := fams[family]
	if !ok {
		return nil, nil
	}
	out := make([]sample, 0, len(mf.GetMetric()))
	for _, m := range mf.GetMetric() {
		s := sample{Labels: map[string]string{}, Value: value(mf.GetType(), m)}
		for _, l := range m.GetLabel() {
			s.Labels[l.GetName()] = l.GetValue()
		}
		out = append(out, s)
	}
	return out, nil
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}
