package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Compare lists what changed from base to cur: claim cells and specs whose
// result changed, splits whose shares moved beyond SplitTolerance, and
// metric series that appeared or vanished.
func Compare(base, cur *Report, baseName string) *Diff {
	d := &Diff{Baseline: baseName, BaselineHeadline: base.Headline, Tolerance: SplitTolerance}
	d.Claims = changes(cellResults(base), cellResults(cur))
	d.Specs = changes(specResults(base), specResults(cur))
	d.Splits = splitChanges(base.Splits, cur.Splits)
	d.SeriesAppeared, d.SeriesVanished = seriesChanges(base.Series, cur.Series)
	return d
}

// CellName names a claim cell in a Diff: "claim / pair".
func CellName(claim, pair string) string { return claim + " / " + pair }

func cellResults(r *Report) map[string]string {
	out := map[string]string{}
	for _, c := range r.Claims {
		for _, row := range c.Rows {
			out[CellName(c.Name, row.Pair)] = row.Result
		}
	}
	return out
}

func specResults(r *Report) map[string]string {
	out := map[string]string{}
	for _, s := range r.Specs {
		out[s.Name] = s.Result
	}
	return out
}

func changes(before, after map[string]string) []ResultChange {
	var out []ResultChange
	for name, b := range before {
		if a, ok := after[name]; !ok || a != b {
			out = append(out, ResultChange{Name: name, Before: b, After: cmp.Or(a, Absent)})
		}
	}
	for name, a := range after {
		if _, ok := before[name]; !ok {
			out = append(out, ResultChange{Name: name, Before: Absent, After: a})
		}
	}
	slices.SortFunc(out, func(x, y ResultChange) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// splitChanges matches each split of one run with the other's: the same
// claim, pair and title first, then, within a claim and pair, in order (the
// title changes with the request count, the shares stay comparable). The
// matched ones are listed when a share moved beyond SplitTolerance, the
// others as absent from one run.
func splitChanges(before, after []SplitResult) []SplitChange {
	type key struct{ claim, pair string }
	used := make([]bool, len(after))
	var out []SplitChange
	var unmatched []Split
	for _, b := range before {
		i := slices.IndexFunc(after, func(a SplitResult) bool {
			return a.Claim == b.Claim && a.Pair == b.Pair && a.Title == b.Title
		})
		if i < 0 || used[i] {
			unmatched = append(unmatched, b.Split)
			continue
		}
		used[i] = true
		out = appendMoved(out, b.Split, after[i].Split)
	}
	for _, b := range unmatched {
		i := slices.IndexFunc(after, func(a SplitResult) bool { return a.Claim == b.Claim && a.Pair == b.Pair })
		for i >= 0 && used[i] {
			next := slices.IndexFunc(after[i+1:], func(a SplitResult) bool { return a.Claim == b.Claim && a.Pair == b.Pair })
			if next < 0 {
				i = -1
				break
			}
			i += 1 + next
		}
		if i < 0 {
			out = append(out, SplitChange{Claim: b.Claim, Pair: b.Pair, Title: b.Title, Before: b.Counts(), After: Absent, MaxShift: 1})
			continue
		}
		used[i] = true
		out = appendMoved(out, b, after[i].Split)
	}
	for i, a := range after {
		if !used[i] {
			out = append(out, SplitChange{Claim: a.Claim, Pair: a.Pair, Title: a.Title, Before: Absent, After: a.Counts(), MaxShift: 1})
		}
	}
	slices.SortFunc(out, func(x, y SplitChange) int {
		return cmp.Or(strings.Compare(x.Claim, y.Claim), strings.Compare(x.Pair, y.Pair), strings.Compare(x.Title, y.Title))
	})
	return out
}

func appendMoved(out []SplitChange, b, a Split) []SplitChange {
	shift := maxShift(b, a)
	if shift <= SplitTolerance {
		return out
	}
	title := b.Title
	if a.Title != b.Title {
		title = b.Title + " → " + a.Title
	}
	return append(out, SplitChange{Claim: b.Claim, Pair: b.Pair, Title: title, Before: b.Counts(), After: a.Counts(), MaxShift: shift})
}

// shares are a split's per-replica fractions of its requests, largest first.
func shares(s Split) []float64 {
	total := float64(s.Requests)
	if total <= 0 {
		for _, r := range s.Replicas {
			total += r.Count
		}
	}
	out := make([]float64, len(s.Replicas))
	for i, r := range s.Replicas {
		if total > 0 {
			out[i] = r.Count / total
		}
	}
	slices.SortFunc(out, func(a, b float64) int { return cmp.Compare(b, a) })
	return out
}

// maxShift is the largest difference between two splits' shares, compared
// largest first; a replica one split lacks counts as a share of 0.
func maxShift(a, b Split) float64 {
	sa, sb := shares(a), shares(b)
	shift := 0.0
	for i := range max(len(sa), len(sb)) {
		var x, y float64
		if i < len(sa) {
			x = sa[i]
		}
		if i < len(sb) {
			y = sb[i]
		}
		shift = max(shift, math.Abs(x-y))
	}
	return shift
}

func seriesChanges(before, after []SeriesSeen) (appeared, vanished []SeriesSeen) {
	for _, s := range after {
		if !slices.Contains(before, s) {
			appeared = append(appeared, s)
		}
	}
	for _, s := range before {
		if !slices.Contains(after, s) {
			vanished = append(vanished, s)
		}
	}
	return appeared, vanished
}

// diffLines is the diff as the report prints it, section by section.
func diffLines(d *Diff) [][2]string {
	var out [][2]string
	add := func(section, line string) { out = append(out, [2]string{section, line}) }
	for _, c := range d.Claims {
		add("Claims whose result changed", fmt.Sprintf("%s: %s → %s", c.Name, c.Before, c.After))
	}
	for _, c := range d.Specs {
		add("Specs whose result changed", fmt.Sprintf("%s: %s → %s", c.Name, c.Before, c.After))
	}
	for _, s := range d.Splits {
		switch {
		case s.Before == Absent:
			add("Splits measured only in this run", fmt.Sprintf("%s / %s, %s: %s", s.Claim, s.Pair, s.Title, s.After))
		case s.After == Absent:
			add("Splits measured only in the baseline", fmt.Sprintf("%s / %s, %s: %s", s.Claim, s.Pair, s.Title, s.Before))
		default:
			add(fmt.Sprintf("Splits that moved by more than %.0f percentage points", 100*d.Tolerance),
				fmt.Sprintf("%s / %s, %s: %s → %s (largest share change %.0f points)", s.Claim, s.Pair, s.Title, s.Before, s.After, 100*s.MaxShift))
		}
	}
	for _, s := range d.SeriesAppeared {
		add("Metric series that appeared", fmt.Sprintf("%s / %s: %s", s.Claim, s.Pair, s.Key))
	}
	for _, s := range d.SeriesVanished {
		add("Metric series that vanished", fmt.Sprintf("%s / %s: %s", s.Claim, s.Pair, s.Key))
	}
	return out
}
