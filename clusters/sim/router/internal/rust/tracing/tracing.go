// Package tracing writes log lines exactly as the routers' tracing-subscriber
// setup does (docs/routers.md#log-line-format): the "full" format with a UTC
// "%Y-%m-%d %H:%M:%S" timestamp, the level, the target, file:line, and the
// message, with ANSI colour (with_ansi(true) is hard-coded in both routers)
// around the timestamp, level, target and location; the message is plain.
package tracing

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Level is a tracing level.
type Level int

const (
	Trace Level = iota
	Debug
	Info
	Warn
	Error
)

// ParseLevel reads --log-level (debug|info|warn|error; also trace).
func ParseLevel(s string) (Level, bool) {
	switch strings.ToLower(s) {
	case "trace":
		return Trace, true
	case "debug":
		return Debug, true
	case "info":
		return Info, true
	case "warn":
		return Warn, true
	case "error":
		return Error, true
	}
	return Info, false
}

// The level column: tracing-subscriber pads to five characters, and paints
// TRACE purple, DEBUG blue, INFO green, WARN yellow, ERROR red.
var levelText = map[Level]string{Trace: "TRACE", Debug: "DEBUG", Info: " INFO", Warn: " WARN", Error: "ERROR"}
var levelColour = map[Level]string{Trace: "35", Debug: "34", Info: "32", Warn: "33", Error: "31"}

const (
	dim   = "\x1b[2m"
	reset = "\x1b[0m"
)

// Site is the call site of a log statement in the router's source: its module
// path (the tracing target) and file:line.
type Site struct {
	Target string
	File   string
	Line   int
}

// Logger writes formatted events to w. It is safe for concurrent use.
type Logger struct {
	mu   sync.Mutex
	w    io.Writer
	min  Level
	ansi bool
	now  func() time.Time
}

// New returns a logger writing events at min or above.
func New(w io.Writer, min Level) *Logger {
	return &Logger{w: w, min: min, ansi: true, now: time.Now}
}

// WithClock replaces the clock (tests).
func (l *Logger) WithClock(now func() time.Time) *Logger { l.now = now; return l }

// WithANSI turns colour on or off (both routers hard-code it on).
func (l *Logger) WithANSI(on bool) *Logger { l.ansi = on; return l }

// Enabled reports whether events at lv are written.
func (l *Logger) Enabled(lv Level) bool { return lv >= l.min }

// Log writes one event.
func (l *Logger) Log(lv Level, s Site, format string, args ...any) {
	if l == nil || lv < l.min {
		return
	}
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	line := l.format(lv, s, msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, line)
}

// Info, Warn, Error and Debug are Log at that level.
func (l *Logger) Info(s Site, format string, args ...any)  { l.Log(Info, s, format, args...) }
func (l *Logger) Warn(s Site, format string, args ...any)  { l.Log(Warn, s, format, args...) }
func (l *Logger) Error(s Site, format string, args ...any) { l.Log(Error, s, format, args...) }
func (l *Logger) Debug(s Site, format string, args ...any) { l.Log(Debug, s, format, args...) }

func (l *Logger) format(lv Level, s Site, msg string) string {
	ts := l.now().UTC().Format("2006-01-02 15:04:05")
	var b strings.Builder
	if l.ansi {
		b.WriteString(dim + ts + reset + " ")
		b.WriteString("\x1b[" + levelColour[lv] + "m" + levelText[lv] + reset + " ")
		b.WriteString(dim + s.Target + reset + dim + ":" + reset + " ")
		b.WriteString(dim + s.File + reset + dim + ":" + reset)
		b.WriteString(dim + strconv.Itoa(s.Line) + ":" + reset + " ")
	} else {
		b.WriteString(ts + " " + levelText[lv] + " " + s.Target + ": " + s.File + ":" + strconv.Itoa(s.Line) + ": ")
	}
	b.WriteString(msg)
	b.WriteByte('\n')
	return b.String()
}

// Strip removes ANSI escape sequences (for tests and log matching).
func Strip(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && !(s[j] >= 0x40 && s[j] <= 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Print writes one event whose message is already formatted.
func (l *Logger) Print(lv Level, s Site, msg string) {
	if l == nil || lv < l.min {
		return
	}
	line := l.format(lv, s, msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, line)
}
