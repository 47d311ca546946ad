package metrics

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Matcher selects series by one label, with Prometheus selector semantics:
// a missing label reads as "".
type Matcher struct {
	Label string
	Op    Op
	Value string
	re    *regexp.Regexp
	err   error
}

// Op is how a Matcher compares its label.
type Op string

// The four Prometheus label matcher operators.
const (
	OpEq    Op = "="
	OpNe    Op = "!="
	OpRe    Op = "=~"
	OpNotRe Op = "!~"
)

// Eq matches series whose label equals value; Eq(l, "") matches series
// without l. For le and quantile the comparison is numeric, so "1.0" (vLLM)
// and "1" (client_golang) name the same bucket.
func Eq(label, value string) Matcher { return Matcher{Label: label, Op: OpEq, Value: value} }

// Ne matches series whose label differs from value.
func Ne(label, value string) Matcher { return Matcher{Label: label, Op: OpNe, Value: value} }

// Has matches series that carry label with a non-empty value (`label!=""`).
func Has(label string) Matcher { return Ne(label, "") }

// Re matches series whose label matches the regular expression, anchored at
// both ends as in PromQL. A bad pattern makes every query using it fail.
func Re(label, pattern string) Matcher { return newRe(label, OpRe, pattern) }

// NotRe matches series whose label does not match the anchored pattern.
func NotRe(label, pattern string) Matcher { return newRe(label, OpNotRe, pattern) }

func newRe(label string, op Op, pattern string) Matcher {
	m := Matcher{Label: label, Op: op, Value: pattern}
	m.re, m.err = regexp.Compile("^(?:" + pattern + ")$")
	if m.err != nil {
		m.err = fmt.Errorf("label matcher %s%s%q: %w", label, op, pattern, m.err)
	}
	return m
}

// Labels is shorthand for several Eq matchers: Labels("policy", "round_robin",
// "worker", url). An odd count makes every query using them fail.
func Labels(kv ...string) []Matcher {
	if len(kv)%2 != 0 {
		return []Matcher{{Label: kv[len(kv)-1], Op: OpEq, err: fmt.Errorf("metrics.Labels: odd number of arguments %q; pass label, value pairs", kv)}}
	}
	out := make([]Matcher, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Eq(kv[i], kv[i+1]))
	}
	return out
}

// Err reports a matcher that cannot be used (a bad regular expression).
func (m Matcher) Err() error { return m.err }

// Matches reports whether a series with these labels is selected.
func (m Matcher) Matches(labels map[string]string) bool {
	v := labels[m.Label]
	switch m.Op {
	case OpEq:
		return eqLabel(m.Label, v, m.Value)
	case OpNe:
		return !eqLabel(m.Label, v, m.Value)
	case OpRe:
		return m.re != nil && m.re.MatchString(v)
	case OpNotRe:
		return m.re != nil && !m.re.MatchString(v)
	}
	return false
}

func eqLabel(label, got, want string) bool {
	if got == want {
		return true
	}
	if label == "le" || label == "quantile" {
		g, err1 := strconv.ParseFloat(got, 64)
		w, err2 := strconv.ParseFloat(want, 64)
		return err1 == nil && err2 == nil && g == w
	}
	return false
}

// String is the matcher in PromQL syntax, e.g. policy="round_robin".
func (m Matcher) String() string {
	return m.Label + string(m.Op) + strconv.Quote(m.Value)
}

// Selector renders a metric name and matchers the way PromQL would write
// them: vllm_router_policy_decisions_total{policy="round_robin"}.
func Selector(name string, ms []Matcher) string {
	if len(ms) == 0 {
		return name
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func checkMatchers(ms []Matcher) error {
	for _, m := range ms {
		if m.err != nil {
			return m.err
		}
		switch m.Op {
		case OpEq, OpNe, OpRe, OpNotRe:
		default:
			return fmt.Errorf("label matcher on %q has no operator; build it with metrics.Eq, Ne, Has, Re or NotRe", m.Label)
		}
		if (m.Op == OpRe || m.Op == OpNotRe) && m.re == nil {
			return fmt.Errorf("label matcher %s: build regular-expression matchers with metrics.Re or NotRe", m)
		}
	}
	return nil
}

func matchAll(labels map[string]string, ms []Matcher) bool {
	for _, m := range ms {
		if !m.Matches(labels) {
			return false
		}
	}
	return true
}

// FormatSeries writes one series as Prometheus does: name{a="1",b="2"}, with
// labels sorted and the merge label last so the interesting ones come first.
func FormatSeries(name string, labels map[string]string) string {
	return seriesKey(name, labels)
}

func seriesKey(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != SourceLabel {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if _, ok := labels[SourceLabel]; ok {
		keys = append(keys, SourceLabel)
	}
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// String is the sample as one exposition-style line.
func (s Sample) String() string {
	return FormatSeries(s.Name, s.Labels) + " " + FormatValue(s.Value)
}

// FormatValue writes a value in its shortest exact form.
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
