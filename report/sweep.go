package report

import (
	"fmt"
	"html"
	"slices"
	"strings"
	"time"
)

// EntrySweep names a Sweep entry.
const EntrySweep = "sweep"

// Sweep is one pair's traffic at several concurrency levels: per level the
// split by engine counters, the failures and the latency percentiles. The
// report draws the split against concurrency, one stacked bar per level.
type Sweep struct {
	Claim string `json:"claim"`
	Pair  string `json:"pair"`
	// Title says what traffic ran at each level.
	Title string `json:"title"`
	// Source names the engine counter behind the splits.
	Source string `json:"source"`
	// Expected is the derived outcome in words.
	Expected string       `json:"expected"`
	Levels   []SweepLevel `json:"levels"`
}

// SweepLevel is one concurrency level of a Sweep.
type SweepLevel struct {
	Concurrency int            `json:"concurrency"`
	Requests    int            `json:"requests"`
	Failures    int            `json:"failures"`
	Replicas    []ReplicaCount `json:"replicas"`
	// Latency covers the successful requests, TTFT the successful streams.
	Latency Percentiles `json:"latency"`
	TTFT    Percentiles `json:"ttft"`
	// DriverBound is the driver's own overhead measured at this level
	// (Report.DriverOverhead says how); nil when it was not measured.
	DriverBound *LevelBound `json:"driverOverhead,omitempty"`
}

// Percentiles are nearest-rank percentiles in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50Ms"`
	P95 float64 `json:"p95Ms"`
	P99 float64 `json:"p99Ms"`
}

// Millis converts three durations into Percentiles.
func Millis(p50, p95, p99 time.Duration) Percentiles {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Percentiles{P50: ms(p50), P95: ms(p95), P99: ms(p99)}
}

func (p Percentiles) String() string {
	return fmt.Sprintf("%s / %s / %s", formatMs(p.P50), formatMs(p.P95), formatMs(p.P99))
}

func formatMs(v float64) string { return fmt.Sprintf("%.1f", v) }

// EntryName implements Entry.
func (Sweep) EntryName() string { return EntrySweep }

// Counts is a level's split as "61/60".
func (l SweepLevel) Counts() string {
	parts := make([]string, len(l.Replicas))
	for i, r := range l.Replicas {
		parts[i] = formatNumber(r.Count)
	}
	return strings.Join(parts, "/")
}

func (s Sweep) String() string {
	var parts []string
	for _, l := range s.Levels {
		parts = append(parts, fmt.Sprintf("c=%d %s (%d failed)", l.Concurrency, l.Counts(), l.Failures))
	}
	return fmt.Sprintf("%s %s: %s; expected %s", s.Pair, s.Title, strings.Join(parts, ", "), s.Expected)
}

// Describe implements Describer.
func (s Sweep) Describe() string { return "sweep " + s.String() }

// sweepMarkdown is a sweep's table, one row per level with the driver
// overhead bound measured at that level, and text bars.
func sweepMarkdown(s SweepResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**, %s: by `%s`; expected: %s; %s\n\n", s.Pair, s.Title, s.Source, s.Expected, s.Result)
	b.WriteString("| Concurrency | Split | Failed | Latency p50/p95/p99 ms | TTFT p50/p95/p99 ms | Driver overhead bound ms (TTFT / latency) |\n|---|---|---|---|---|---|\n")
	for _, l := range s.Levels {
		fmt.Fprintf(&b, "| %d | %s | %d of %d | %s | %s | %s |\n", l.Concurrency, l.Counts(), l.Failures, l.Requests, l.Latency, l.TTFT, l.DriverBound)
	}
	b.WriteString("\n")
	for _, l := range s.Levels {
		b.WriteString(fmt.Sprintf("c=%d\n", l.Concurrency))
		b.WriteString(Split{Requests: l.Requests, Replicas: l.Replicas}.Charts()[0].Text())
	}
	return b.String()
}

// sweepFills colour the replicas' segments, from the Okabe-Ito palette
// (told apart with the common colour-vision deficiencies); the first is
// BarFill, which check-render.sh looks for. The legend names each replica
// in full.
var sweepFills = []string{BarFill, "#e69f00", "#cc79a7", "#009e73", "#000000"}

// sweepSVG draws the split against concurrency: one bar per level, split
// into one segment per replica in proportion to its count.
func sweepSVG(s Sweep) string {
	const (
		width    = 520
		labelW   = 60
		barW     = 360
		rowH     = 26
		barH     = 16
		firstRow = 22
	)
	var names []string
	for _, l := range s.Levels {
		for _, r := range l.Replicas {
			if !slices.Contains(names, r.Replica) {
				names = append(names, r.Replica)
			}
		}
	}
	// The title wraps, never cut: a line of it per 80 characters.
	title := wrap(s.Title, 80)
	top := firstRow + 16*(len(title)-1)
	legendH := 16 * len(names)
	height := top + rowH*max(len(s.Levels), 1) + legendH + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		width, height, width, height, html.EscapeString(s.Pair+" "+s.Title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(s.Pair+" "+s.Title))
	for i, line := range title {
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="12" font-family="sans-serif" font-weight="bold">%s</text>`, 14+16*i, html.EscapeString(line))
	}
	for i, l := range s.Levels {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="11" font-family="monospace">c=%d</text>`, y+12, l.Concurrency)
		total := 0.0
		for _, r := range l.Replicas {
			total += r.Count
		}
		x := float64(labelW)
		for _, r := range l.Replicas {
			w := 0.0
			if total > 0 {
				w = barW * r.Count / total
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" shape-rendering="crispEdges"/>`,
				x, y, w, barH, sweepFills[slices.Index(names, r.Replica)%len(sweepFills)])
			x += w
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" font-family="sans-serif">%s</text>`, labelW+barW+6, y+12, html.EscapeString(l.Counts()))
	}
	for i, n := range names {
		y := top + rowH*len(s.Levels) + 16*i
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/>`, labelW, y, sweepFills[i%len(sweepFills)])
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" font-family="monospace">%s</text>`, labelW+14, y+9, html.EscapeString(n))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
