package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxBody bounds what Parse and Scrape read: a real /metrics page is a few
// hundred KiB; anything near this is a misrouted download, not metrics.
const maxBody = 64 << 20

// Parse reads the Prometheus text exposition format (version 0.0.4, what
// prometheus_client, client_golang and metrics-exporter-prometheus serve) into a
// Snapshot. source names where the text came from (a URL, a Pod); it goes into
// Snapshot.Sources and into error messages. A line that does not parse is
// an error that quotes the line.
func Parse(source string, r io.Reader) (Snapshot, error) {
	body, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return Snapshot{}, fmt.Errorf("metrics from %s: read: %w", source, err)
	}
	if len(body) > maxBody {
		return Snapshot{}, fmt.Errorf("metrics from %s: more than %d bytes; is this really a /metrics page?", source, maxBody)
	}
	return ParseText(source, body)
}

// ParseText is Parse over bytes already read.
func ParseText(source string, text []byte) (snap Snapshot, err error) {
	// expfmt is third-party code run on untrusted input; a panic there must
	// become an error, never take down the suite.
	defer func() {
		if r := recover(); r != nil {
			snap, err = Snapshot{}, fmt.Errorf("metrics from %s: the text parser panicked: %v", source, r)
		}
	}()
	in := text
	if len(in) > 0 && in[len(in)-1] != '\n' {
		// The text format ends every line with '\n'; a body cut without one is
		// still readable, so do not fail on the last line alone.
		in = append(append(make([]byte, 0, len(in)+1), in...), '\n')
	}
	// UTF-8 validation accepts every legacy name (vllm:num_requests_running,
	// smg_*, sglang:*) and also quoted UTF-8 names, so no exporter is refused
	// for its naming.
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, perr := p.TextToMetricFamilies(bytes.NewReader(in))
	if perr != nil {
		return Snapshot{}, parseError(source, in, perr)
	}
	snap = Snapshot{
		Time:     time.Now(),
		Sources:  []string{source},
		Families: make(map[string]Family, len(fams)),
	}
	for name, mf := range fams {
		snap.Families[name] = Family{Name: name, Help: mf.GetHelp(), Type: typeName(mf.GetType())}
		snap.Samples = append(snap.Samples, flatten(name, mf)...)
	}
	sortSamples(snap.Samples)
	return snap, nil
}

func parseError(source string, text []byte, err error) error {
	var pe expfmt.ParseError
	if errors.As(err, &pe) {
		lines := strings.Split(string(text), "\n")
		if pe.Line >= 1 && pe.Line <= len(lines) {
			return fmt.Errorf("metrics from %s: line %d: %s: %q", source, pe.Line, pe.Msg, clip(lines[pe.Line-1], 200))
		}
		return fmt.Errorf("metrics from %s: line %d: %s", source, pe.Line, pe.Msg)
	}
	return fmt.Errorf("metrics from %s: %w", source, err)
}

func typeName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM:
		return "histogram"
	case dto.MetricType_GAUGE_HISTOGRAM:
		return "gaugehistogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	default:
		return "untyped"
	}
}

// flatten turns one parsed family back into the samples as they were on the
// wire, so a query names exactly what `curl /metrics` shows.
func flatten(name string, mf *dto.MetricFamily) []Sample {
	var out []Sample
	for _, m := range mf.GetMetric() {
		labels := labelMap(m.GetLabel())
		switch {
		case m.Histogram != nil:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				v := float64(b.GetCumulativeCount())
				if b.CumulativeCountFloat != nil {
					v = b.GetCumulativeCountFloat()
				}
				out = append(out, Sample{Name: name + "_bucket", Labels: with(labels, "le", formatBound(b.GetUpperBound())), Value: v})
			}
			if h.SampleSum != nil {
				out = append(out, Sample{Name: name + "_sum", Labels: labels, Value: h.GetSampleSum()})
			}
			if h.SampleCount != nil || h.SampleCountFloat != nil {
				v := float64(h.GetSampleCount())
				if h.SampleCountFloat != nil {
					v = h.GetSampleCountFloat()
				}
				out = append(out, Sample{Name: name + "_count", Labels: labels, Value: v})
			}
		case m.Summary != nil:
			s := m.GetSummary()
			for _, q := range s.GetQuantile() {
				out = append(out, Sample{Name: name, Labels: with(labels, "quantile", formatBound(q.GetQuantile())), Value: q.GetValue()})
			}
			if s.SampleSum != nil {
				out = append(out, Sample{Name: name + "_sum", Labels: labels, Value: s.GetSampleSum()})
			}
			if s.SampleCount != nil {
				out = append(out, Sample{Name: name + "_count", Labels: labels, Value: float64(s.GetSampleCount())})
			}
		case m.Counter != nil:
			out = append(out, Sample{Name: name, Labels: labels, Value: m.GetCounter().GetValue()})
		case m.Gauge != nil:
			out = append(out, Sample{Name: name, Labels: labels, Value: m.GetGauge().GetValue()})
		case m.Untyped != nil:
			out = append(out, Sample{Name: name, Labels: labels, Value: m.GetUntyped().GetValue()})
		}
	}
	return out
}

func labelMap(pairs []*dto.LabelPair) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	m := make(map[string]string, len(pairs))
	for _, lp := range pairs {
		m[lp.GetName()] = lp.GetValue()
	}
	return m
}

func with(labels map[string]string, k, v string) map[string]string {
	m := make(map[string]string, len(labels)+1)
	for lk, lv := range labels {
		m[lk] = lv
	}
	m[k] = v
	return m
}

// formatBound writes an le/quantile bound in one canonical form ("0.5", "1",
// "+Inf"); the original spelling ("1.0") is lost by the parser, so label
// matchers on le and quantile compare numerically (see Eq).
func formatBound(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// sortSamples orders by name, then labels, so snapshots print and compare
// stably. Keys are built once: building them inside the comparison made it
// the bulk of a parse.
func sortSamples(s []Sample) {
	type keyed struct {
		key string
		s   Sample
	}
	ks := make([]keyed, len(s))
	for i, smp := range s {
		ks[i] = keyed{seriesKey(smp.Name, smp.Labels), smp}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if ks[i].s.Name != ks[j].s.Name {
			return ks[i].s.Name < ks[j].s.Name
		}
		return ks[i].key < ks[j].key
	})
	for i := range ks {
		s[i] = ks[i].s
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
