// Package routerlog reads what vllm-router and sgl-model-gateway print: the
// tracing startup banner `Starting router on ... | policy: <Debug> | ...`
// (docs/routers.md#startup-output) and clap's argument errors (docs/routers.md#clap-errors). Logs
// are taken as `kubectl logs` gives them: ANSI colour codes included.
package routerlog

import (
	"regexp"
	"strings"

	"github.com/gpustack/routing-conformance/internal/ansi"
)

// Line is one log line, with tracing-subscriber's full-format prefix split
// off when it has one:
// `2026-12-02 15:45:01  INFO vllm_router_rs::server: src/server.rs:812: <message>`.
type Line struct {
	Number   int    `json:"number"` // 1-based line number in the log text
	Text     string `json:"text"`   // the line without ANSI codes
	Time     string `json:"time,omitempty"`
	Level    string `json:"level,omitempty"`
	Target   string `json:"target,omitempty"`   // vllm_router_rs::server, smg::server
	Location string `json:"location,omitempty"` // src/server.rs:812
	// Message is the text after the prefix, or the whole line when there is
	// no tracing prefix (println! output such as "VLLM Router starting...").
	Message string `json:"message"`
}

// An optional RFC 3339 stamp from `kubectl logs --timestamps`, then
// tracing's time, padded level, target and file:line.
var prefixRE = regexp.MustCompile(`^(?:\d{4}-\d\d-\d\dT\S+\s+)?(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+(TRACE|DEBUG|INFO|WARN|ERROR)\s+(?:([A-Za-z_][\w]*(?:::[\w]+)*):\s+)?(?:(\S+?:\d+):\s+)?`)

// Lines splits log text into lines, strips ANSI codes and splits off the
// tracing prefix.
func Lines(logs string) []Line {
	raw := strings.Split(logs, "\n")
	if len(raw) > 0 && raw[len(raw)-1] == "" {
		raw = raw[:len(raw)-1]
	}
	out := make([]Line, len(raw))
	for i, r := range raw {
		out[i] = ParseLine(i+1, r)
	}
	return out
}

// ParseLine reads one raw line (number is its 1-based position).
func ParseLine(number int, raw string) Line {
	// tracing-subscriber colours the level and target unconditionally
	// (with_ansi(true)), so every log line has escape codes.
	text := strings.TrimRight(ansi.Strip(raw), "\r")
	l := Line{Number: number, Text: text, Message: text}
	if m := prefixRE.FindStringSubmatchIndex(text); m != nil {
		l.Time = group(text, m, 1)
		l.Level = group(text, m, 2)
		l.Target = group(text, m, 3)
		l.Location = group(text, m, 4)
		l.Message = text[m[1]:]
	} else if m := kubectlStampRE.FindStringIndex(text); m != nil {
		// println! and clap output under `kubectl logs --timestamps`.
		l.Message = text[m[1]:]
	}
	return l
}

var kubectlStampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) `)

func group(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// Tail returns the last n lines' text, for failure messages.
func Tail(lines []Line, n int) []string {
	start := max(0, len(lines)-n)
	out := make([]string, 0, len(lines)-start)
	for _, l := range lines[start:] {
		out = append(out, l.Text)
	}
	return out
}
