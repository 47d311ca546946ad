// Package promtext writes gathered client_golang metric families in the text
// format Python's prometheus_client produces, which is what vLLM and SGLang
// serve on /metrics. It differs from client_golang's own encoder in ways a
// scraper can see:
//
//   - values and le labels are Python floats ("0.0", "16.0", "1.0", "+Inf",
//     "1.7e+09" past six integer digits);
//   - labels come in declaration order, not sorted (single-process mode);
//   - counters and histograms are followed by a "<name>_created" gauge family
//     (single-process mode only);
//   - in multiprocess mode (SGLang) labels are sorted, a histogram's _sum
//     comes before its buckets and _count last, and there is no _created.
//
// The suite reads these pages with package metrics, which parses with
// prometheus/common's expfmt and shares nothing with this writer on
// purpose: the parser is the oracle for what a real scraper sees, this is
// the emulation of what the engines print.
package promtext

import (
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpustack/routing-conformance/sim/engine/internal/jsonw"
)

// ContentType is prometheus_client's CONTENT_TYPE_LATEST for the 0.0.4 format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Style selects the prometheus_client mode to imitate.
type Style struct {
	// Multiprocess imitates MultiProcessCollector (SGLang always runs in it).
	Multiprocess bool
	// LabelOrder gives a family's declared label names in order; a family not
	// listed uses DefaultOrder. Labels listed in neither follow in sorted
	// order; "le" is always last. Ignored in multiprocess mode.
	LabelOrder   map[string][]string
	DefaultOrder []string
}

// Append writes families to dst in Python's text format and returns it.
func Append(dst []byte, families []*dto.MetricFamily, st Style) []byte {
	for _, mf := range families {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		name := mf.GetName()
		dst = appendMeta(dst, name, mf.GetHelp(), typeName(mf.GetType()))
		order := st.order(name)
		var created []byte
		for _, m := range mf.GetMetric() {
			labels := st.labels(m.GetLabel(), order)
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				c := m.GetCounter()
				dst = appendSample(dst, name, "", labels, "", "", c.GetValue())
				if !st.Multiprocess && c.GetCreatedTimestamp() != nil {
					created = appendSample(created, createdName(name), "", labels, "", "", tsSeconds(c.GetCreatedTimestamp().AsTime().UnixNano()))
				}
			case dto.MetricType_GAUGE:
				dst = appendSample(dst, name, "", labels, "", "", m.GetGauge().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				if st.Multiprocess {
					dst = appendSample(dst, name, "_sum", labels, "", "", h.GetSampleSum())
				}
				for _, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue
					}
					dst = appendSample(dst, name, "_bucket", labels, "le", pyFloat(b.GetUpperBound()), float64(b.GetCumulativeCount()))
				}
				dst = appendSample(dst, name, "_bucket", labels, "le", "+Inf", float64(h.GetSampleCount()))
				dst = appendSample(dst, name, "_count", labels, "", "", float64(h.GetSampleCount()))
				if !st.Multiprocess {
					dst = appendSample(dst, name, "_sum", labels, "", "", h.GetSampleSum())
					if h.GetCreatedTimestamp() != nil {
						created = appendSample(created, name, "_created", labels, "", "", tsSeconds(h.GetCreatedTimestamp().AsTime().UnixNano()))
					}
				}
			case dto.MetricType_SUMMARY:
				// prometheus_client summaries carry no quantiles: _count, _sum.
				sm := m.GetSummary()
				dst = appendSample(dst, name, "_count", labels, "", "", float64(sm.GetSampleCount()))
				dst = appendSample(dst, name, "_sum", labels, "", "", sm.GetSampleSum())
				if !st.Multiprocess && sm.GetCreatedTimestamp() != nil {
					created = appendSample(created, name, "_created", labels, "", "", tsSeconds(sm.GetCreatedTimestamp().AsTime().UnixNano()))
				}
			default:
				dst = appendSample(dst, name, "", labels, "", "", m.GetUntyped().GetValue())
			}
		}
		if len(created) > 0 {
			cn := createdName(name)
			if mf.GetType() != dto.MetricType_COUNTER {
				cn = name + "_created"
			}
			dst = appendMeta(dst, cn, mf.GetHelp(), "gauge")
			dst = append(dst, created...)
		}
	}
	return dst
}

// createdName is the _created series of a counter: prometheus_client names it
// after the counter with "_total" replaced.
func createdName(counter string) string {
	return strings.TrimSuffix(counter, "_total") + "_created"
}

func tsSeconds(ns int64) float64 { return float64(ns) / 1e9 }

func typeName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM:
		return "histogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	}
	return "untyped"
}

func appendMeta(dst []byte, name, help, typ string) []byte {
	dst = append(dst, "# HELP "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	for i := 0; i < len(help); i++ {
		switch help[i] {
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		default:
			dst = append(dst, help[i])
		}
	}
	dst = append(dst, "\n# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, typ...)
	return append(dst, '\n')
}

func (st Style) order(family string) []string {
	if st.Multiprocess {
		return nil
	}
	if o, ok := st.LabelOrder[family]; ok {
		return o
	}
	return st.DefaultOrder
}

// labels returns the pairs in output order (without "le").
func (st Style) labels(pairs []*dto.LabelPair, order []string) []*dto.LabelPair {
	if len(order) == 0 {
		return pairs // client_golang already sorts by name
	}
	out := make([]*dto.LabelPair, 0, len(pairs))
	for _, name := range order {
		for _, p := range pairs {
			if p.GetName() == name {
				out = append(out, p)
			}
		}
	}
	for _, p := range pairs {
		if !slices.Contains(order, p.GetName()) {
			out = append(out, p)
		}
	}
	return out
}

func appendSample(dst []byte, name, suffix string, labels []*dto.LabelPair, extraName, extraValue string, v float64) []byte {
	dst = append(dst, name...)
	dst = append(dst, suffix...)
	if len(labels) > 0 || extraName != "" {
		dst = append(dst, '{')
		first := true
		for _, p := range labels {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendLabel(dst, p.GetName(), p.GetValue())
		}
		if extraName != "" {
			if !first {
				dst = append(dst, ',')
			}
			dst = appendLabel(dst, extraName, extraValue)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, ' ')
	dst = append(dst, pyFloat(v)...)
	return append(dst, '\n')
}

func appendLabel(dst []byte, k, v string) []byte {
	dst = append(dst, k...)
	dst = append(dst, `="`...)
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '"':
			dst = append(dst, `\"`...)
		default:
			dst = append(dst, v[i])
		}
	}
	return append(dst, '"')
}

// pyFloat is prometheus_client's floatToGoString: Python's repr of the float,
// switched to an exponent for positive values with more than six integer
// digits (as Go's strconv 'g' would).
func pyFloat(d float64) string {
	switch {
	case math.IsInf(d, 1):
		return "+Inf"
	case math.IsInf(d, -1):
		return "-Inf"
	case math.IsNaN(d):
		return "NaN"
	}
	s := jsonw.PyRepr(d)
	dot := strings.IndexByte(s, '.')
	if d > 0 && dot > 6 {
		mantissa := strings.TrimRight(s[:1]+"."+s[1:dot]+s[dot+1:], "0.")
		return mantissa + "e+0" + strconv.Itoa(dot-1)
	}
	return s
}
