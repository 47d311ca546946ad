package metrics

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Select returns the samples named name whose labels satisfy every matcher,
// sorted by labels. An empty result is not an error here (a series can be
// legitimately absent, e.g. smg_worker_requests_active outside cache_aware);
// only an unusable matcher is.
func (s Snapshot) Select(name string, ms ...Matcher) ([]Sample, error) {
	if err := checkMatchers(ms); err != nil {
		return nil, err
	}
	var out []Sample
	for _, smp := range s.Samples {
		if smp.Name == name && matchAll(smp.Labels, ms) {
			out = append(out, smp)
		}
	}
	sortSamples(out)
	return out, nil
}

// Sum adds the values of the selected series, e.g. every source and every
// finished_reason of a counter. No matching series is a *NoSeriesError, so a
// misspelt name never reads as 0.
func (s Snapshot) Sum(name string, ms ...Matcher) (float64, error) {
	sel, err := s.Select(name, ms...)
	if err != nil {
		return 0, err
	}
	if len(sel) == 0 {
		return 0, s.NoSeries(name, ms...)
	}
	var sum float64
	for _, smp := range sel {
		sum += smp.Value
	}
	return sum, nil
}

// SumBy adds the selected series per value of label (PromQL `sum by (label)`);
// series without the label add up under "".
func (s Snapshot) SumBy(name, label string, ms ...Matcher) (map[string]float64, error) {
	sel, err := s.Select(name, ms...)
	if err != nil {
		return nil, err
	}
	if len(sel) == 0 {
		return nil, s.NoSeries(name, ms...)
	}
	out := map[string]float64{}
	for _, smp := range sel {
		out[smp.Labels[label]] += smp.Value
	}
	return out, nil
}

// Names lists the distinct sample names, sorted.
func (s Snapshot) Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, smp := range s.Samples {
		if !seen[smp.Name] {
			seen[smp.Name] = true
			out = append(out, smp.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TypeOf is the family type ("counter", "gauge", ...) a sample name belongs
// to, looking through the _bucket/_sum/_count suffixes; "" when unknown.
func (s Snapshot) TypeOf(sampleName string) string {
	if f, ok := s.Families[sampleName]; ok {
		return f.Type
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(sampleName, suf); ok {
			if f, ok := s.Families[base]; ok && f.Type != "counter" && f.Type != "gauge" {
				return f.Type
			}
		}
	}
	return ""
}

// NoSeries is the *NoSeriesError for a query of name and ms that selected
// nothing: what Sum returns then, for callers that Select and find no
// series. It lists the series of that name present, or the nearest names.
func (s Snapshot) NoSeries(name string, ms ...Matcher) error {
	return newNoSeries(name, ms, s.Sources, s)
}

// NoSeriesError says no series matched a query, with what was there instead.
type NoSeriesError struct {
	Selector string   // the query in PromQL syntax
	Sources  []string // where the snapshot(s) came from
	// SameName lists series of the queried name that the label matchers
	// rejected (at most 10), with their values.
	SameName []string
	// Nearest lists the closest metric names present when the name itself is
	// absent (at most 5).
	Nearest []string
}

func (e *NoSeriesError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no series %s in the metrics of %s", e.Selector, strings.Join(e.Sources, ", "))
	if len(e.SameName) > 0 {
		fmt.Fprintf(&b, "; series of that name present: %s", strings.Join(e.SameName, "; "))
	} else if len(e.Nearest) > 0 {
		fmt.Fprintf(&b, "; nearest names present: %s", strings.Join(e.Nearest, ", "))
	} else {
		b.WriteString("; the snapshot holds no samples at all")
	}
	return b.String()
}

// IsNoSeries reports whether err says a query matched nothing; callers for
// which an absent series means zero (SGLang creates series lazily) test this.
func IsNoSeries(err error) bool {
	var e *NoSeriesError
	return errors.As(err, &e)
}

func newNoSeries(name string, ms []Matcher, sources []string, snaps ...Snapshot) *NoSeriesError {
	e := &NoSeriesError{Selector: Selector(name, ms), Sources: sources}
	seen := map[string]bool{}
	var names []string
	for _, s := range snaps {
		for _, smp := range s.Samples {
			if smp.Name == name && len(e.SameName) < 10 {
				line := smp.String()
				if !seen[line] {
					seen[line] = true
					e.SameName = append(e.SameName, line)
				}
			}
		}
		names = append(names, s.Names()...)
	}
	if len(e.SameName) == 0 {
		e.Nearest = Nearest(name, names, 5)
	}
	return e
}

// Nearest returns up to n candidates closest to name by edit distance, a
// candidate containing name (or contained in it) counting as closer; used to
// say "did you mean" when a metric is missing.
func Nearest(name string, candidates []string, n int) []string {
	type scored struct {
		s     string
		score int
	}
	seen := map[string]bool{}
	var all []scored
	for _, c := range candidates {
		if seen[c] || c == name {
			continue
		}
		seen[c] = true
		d := levenshtein(name, c)
		if name != "" && (strings.Contains(c, name) || strings.Contains(name, c)) {
			d /= 2
		}
		all = append(all, scored{c, d})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score < all[j].score
		}
		return all[i].s < all[j].s
	})
	var out []string
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].s)
	}
	return out
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
