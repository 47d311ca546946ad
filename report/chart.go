package report

import (
	"fmt"
	"html"
	"strings"
)

// BarFill is the fill of every bar in the split charts. check-render.sh
// looks for this colour in a headless screenshot to prove the charts drew.
const BarFill = "#1f77b4"

// chartSVG draws one split as a horizontal bar chart: one bar per replica,
// its label and its count, scaled to the largest count (or the request
// total, so an all-on-one split fills the width). Plain SVG, no scripts.
func chartSVG(s Split) string {
	const (
		width    = 470
		labelW   = 170
		barMaxW  = 240
		rowH     = 34
		barH     = 18
		top      = 22
		fontSize = 12
	)
	scale := float64(s.Requests)
	for _, r := range s.Replicas {
		scale = max(scale, r.Count)
	}
	height := top + rowH*max(len(s.Replicas), 1) + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		width, height, width, height, html.EscapeString(s.Pair+" "+s.Title))
	fmt.Fprintf(&b, `<text x="0" y="14" font-size="%d" font-family="sans-serif" font-weight="bold">%s</text>`,
		fontSize, html.EscapeString(truncate(s.Title, 70)))
	for i, r := range s.Replicas {
		y := top + i*rowH
		w := 0
		if scale > 0 {
			w = int(float64(barMaxW) * r.Count / scale)
		}
		// Pod names share the deployment's prefix; their tails tell them apart.
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="%d" font-family="monospace">%s</text>`,
			y+11, fontSize-1, html.EscapeString(tail(r.Replica, 24)))
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="%d" font-family="monospace" fill="#666">%s</text>`,
			y+24, fontSize-2, html.EscapeString(tail(r.Address, 26)))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" shape-rendering="crispEdges"/>`,
			labelW, y, w, barH, BarFill)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="%d" font-family="sans-serif">%s</text>`,
			labelW+w+6, y+barH-4, fontSize, formatNumber(r.Count))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// textBars is the Markdown stand-in for a chart: one bar of block
// characters per replica.
func textBars(s Split) string {
	scale := float64(s.Requests)
	for _, r := range s.Replicas {
		scale = max(scale, r.Count)
	}
	var b strings.Builder
	b.WriteString("```\n")
	for _, r := range s.Replicas {
		n := 0
		if scale > 0 {
			n = int(40 * r.Count / scale)
		}
		// Pad by characters: the block character is three bytes.
		fmt.Fprintf(&b, "%-24s %-24s %s%s %s\n", tail(r.Replica, 24), tail(r.Address, 24),
			strings.Repeat("█", n), strings.Repeat(" ", 40-n), formatNumber(r.Count))
	}
	b.WriteString("```\n")
	return b.String()
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// tail keeps the last n characters, marking the cut.
func tail(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}
