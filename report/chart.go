package report

import (
	"fmt"
	"html"
	"strings"
	"unicode/utf8"
)

// BarFill is the fill of every bar in the charts (Okabe-Ito blue).
// check-render.sh looks for this colour in a headless screenshot to prove
// the charts drew.
const BarFill = "#0072b2"

// Chart geometry: the labels sit on their own line above each bar, so a
// full Pod name and address never compete with the bar for width.
const (
	chartWidth    = 560
	chartBarMaxW  = 440
	chartFontSize = 12
	chartLineH    = 16
	chartBarH     = 16
	chartWrapAt   = 76 // characters of title per line at this width
)

func (c Chart) scale() float64 {
	s := c.Scale
	for _, b := range c.Bars {
		s = max(s, b.Value)
	}
	return s
}

func (c Chart) value(v float64) string {
	if c.Unit == "" {
		return formatNumber(v)
	}
	return formatNumber(v) + " " + c.Unit
}

// SVG draws the chart as inline SVG with every text escaped; a <title>
// repeats each bar's full label as a tooltip.
func (c Chart) SVG() string {
	title := wrap(c.Title, chartWrapAt)
	top := chartLineH*len(title) + 6
	rowH := chartLineH + chartBarH + 10
	for _, b := range c.Bars {
		if b.Detail != "" {
			rowH = 2*chartLineH + chartBarH + 10
			break
		}
	}
	height := top + rowH*max(len(c.Bars), 1)
	scale := c.scale()
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		chartWidth, height, chartWidth, height, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(c.Title))
	for i, line := range title {
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="%d" font-family="sans-serif" font-weight="bold">%s</text>`,
			chartLineH*(i+1)-3, chartFontSize, html.EscapeString(line))
	}
	for i, bar := range c.Bars {
		y := top + i*rowH
		w := 0
		if scale > 0 {
			w = int(float64(chartBarMaxW) * bar.Value / scale)
		}
		fmt.Fprintf(&b, `<g><title>%s</title>`, html.EscapeString(strings.TrimSpace(bar.Label+" "+bar.Detail)))
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="%d" font-family="monospace">%s</text>`,
			y+chartLineH-4, chartFontSize-1, html.EscapeString(bar.Label))
		if bar.Detail != "" {
			y += chartLineH
			fmt.Fprintf(&b, `<text x="0" y="%d" font-size="%d" font-family="monospace" fill="#555">%s</text>`,
				y+chartLineH-4, chartFontSize-2, html.EscapeString(bar.Detail))
		}
		y += chartLineH
		fmt.Fprintf(&b, `<rect x="0" y="%d" width="%d" height="%d" fill="%s" shape-rendering="crispEdges"/>`,
			y, w, chartBarH, BarFill)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="%d" font-family="sans-serif">%s</text></g>`,
			w+6, y+chartBarH-4, chartFontSize, html.EscapeString(c.value(bar.Value)))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// Text is the Markdown stand-in for the chart: the title, then one line
// per bar with its full label and a bar of block characters.
func (c Chart) Text() string {
	const barW = 40
	scale := c.scale()
	labelW := 0
	for _, bar := range c.Bars {
		labelW = max(labelW, utf8.RuneCountInString(barLabel(bar)))
	}
	var b strings.Builder
	b.WriteString("```\n")
	for _, bar := range c.Bars {
		n := 0
		if scale > 0 {
			n = int(barW * bar.Value / scale)
		}
		label := barLabel(bar)
		// Pad by characters: the block character is three bytes.
		fmt.Fprintf(&b, "%s%s %s%s %s\n", label, strings.Repeat(" ", labelW-utf8.RuneCountInString(label)),
			strings.Repeat("█", n), strings.Repeat(" ", barW-n), c.value(bar.Value))
	}
	b.WriteString("```\n")
	return b.String()
}

func barLabel(b Bar) string { return strings.TrimSpace(b.Label + " " + b.Detail) }

// wrap breaks s at spaces into lines of at most n characters; a word longer
// than n gets a line of its own, whole.
func wrap(s string, n int) []string {
	var lines []string
	var cur string
	for _, w := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = w
		case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) <= n:
			cur += " " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}
