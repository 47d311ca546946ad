package metrics

import (
	"fmt"
	"strings"
)

// SeriesDelta is one series' change between two snapshots.
type SeriesDelta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Before float64           `json:"before"`
	After  float64           `json:"after"`
	// BeforeMissing: the series appeared between the snapshots and is counted
	// from 0 (SGLang and the Rust exporters create series on first use).
	BeforeMissing bool `json:"beforeMissing,omitempty"`
	// AfterMissing: the series disappeared; its process restarted or its
	// source went away, so no delta can be computed for it.
	AfterMissing bool `json:"afterMissing,omitempty"`
}

// Delta is After − Before.
func (d SeriesDelta) Delta() float64 { return d.After - d.Before }

// String shows the evidence: series, before → after (+delta).
func (d SeriesDelta) String() string {
	before := FormatValue(d.Before)
	if d.BeforeMissing {
		before = "absent(0)"
	}
	after := FormatValue(d.After)
	if d.AfterMissing {
		return fmt.Sprintf("%s: %s → absent", FormatSeries(d.Name, d.Labels), before)
	}
	return fmt.Sprintf("%s: %s → %s (%+g)", FormatSeries(d.Name, d.Labels), before, after, d.Delta())
}

// CounterResetError says a monotonic series went down or vanished between the
// snapshots, so a delta over it would be wrong (negative or short).
type CounterResetError struct {
	Selector string
	Series   []SeriesDelta // the offending series only
}

func (e *CounterResetError) Error() string {
	lines := make([]string, len(e.Series))
	for i, d := range e.Series {
		lines[i] = d.String()
	}
	return fmt.Sprintf("counter reset in %s between the snapshots (a process restarted or a source went away; take the 'before' snapshot again after it is back): %s",
		e.Selector, strings.Join(lines, "; "))
}

// Deltas pairs the series selected in before and after by their full label
// set. It returns every pair (the evidence) together with an error when:
// a matcher is unusable; no series matched in either snapshot
// (*NoSeriesError); or a counter, histogram or summary series decreased or
// vanished (*CounterResetError). Gauges may go down.
func Deltas(before, after Snapshot, name string, ms ...Matcher) ([]SeriesDelta, error) {
	b, err := before.Select(name, ms...)
	if err != nil {
		return nil, err
	}
	a, err := after.Select(name, ms...)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 && len(b) == 0 {
		return nil, newNoSeries(name, ms, unionSources(before, after), after, before)
	}
	prev := make(map[string]Sample, len(b))
	for _, s := range b {
		prev[seriesKey(s.Name, s.Labels)] = s
	}
	monotonic := isMonotonic(after, name) && isMonotonic(before, name)
	var out, bad []SeriesDelta
	for _, s := range a {
		k := seriesKey(s.Name, s.Labels)
		d := SeriesDelta{Name: s.Name, Labels: s.Labels, After: s.Value}
		if p, ok := prev[k]; ok {
			d.Before = p.Value
			delete(prev, k)
		} else {
			d.BeforeMissing = true
		}
		out = append(out, d)
		if monotonic && d.After < d.Before {
			bad = append(bad, d)
		}
	}
	for _, s := range b {
		if _, gone := prev[seriesKey(s.Name, s.Labels)]; gone {
			d := SeriesDelta{Name: s.Name, Labels: s.Labels, Before: s.Value, After: s.Value, AfterMissing: true}
			out = append(out, d)
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 {
		return out, &CounterResetError{Selector: Selector(name, ms), Series: bad}
	}
	return out, nil
}

// Delta is the sum of Deltas: how much the selected series rose in all.
// It is 0 whenever err is not nil.
func Delta(before, after Snapshot, name string, ms ...Matcher) (float64, error) {
	ds, err := Deltas(before, after, name, ms...)
	if err != nil {
		return 0, err
	}
	return SumDeltas(ds), nil
}

// DeltaBy is Delta per value of label, e.g. per worker; series without the
// label add up under "".
func DeltaBy(before, after Snapshot, name, label string, ms ...Matcher) (map[string]float64, error) {
	ds, err := Deltas(before, after, name, ms...)
	if err != nil {
		return nil, err
	}
	return SumDeltasBy(ds, label), nil
}

// SumDeltas adds up the rise of every series in ds, for callers that keep
// the Deltas as evidence and need their total too.
func SumDeltas(ds []SeriesDelta) float64 {
	var sum float64
	for _, d := range ds {
		sum += d.Delta()
	}
	return sum
}

// SumDeltasBy is SumDeltas per value of label; series without the label add
// up under "".
func SumDeltasBy(ds []SeriesDelta, label string) map[string]float64 {
	out := map[string]float64{}
	for _, d := range ds {
		out[d.Labels[label]] += d.Delta()
	}
	return out
}

// isMonotonic: only a known gauge may go down; untyped series get the benefit
// of the doubt unless their name says they count.
func isMonotonic(s Snapshot, name string) bool {
	switch s.TypeOf(name) {
	case "gauge", "gaugehistogram":
		return false
	case "counter", "histogram", "summary":
		return true
	}
	for _, suf := range []string{"_total", "_count", "_sum", "_bucket"} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

func unionSources(snaps ...Snapshot) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range snaps {
		for _, src := range s.Sources {
			if !seen[src] {
				seen[src] = true
				out = append(out, src)
			}
		}
	}
	return out
}
