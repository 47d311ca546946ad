// Package zaplog writes log lines the way the llm-d EPP's logger does: one
// zap JSON object per line with the production encoder config and the EPP's
// level encoder (llm-d/llm-d-router@71f4f099:pkg/common/observability/logging/logger.go
// InitSetupLogging; sigs.k8s.io/controller-runtime@v0.23.3:pkg/log/zap/zap.go).
//
// Keys, in zap's order: "level" (info|error|debug|trace, V(1..3) is "info"),
// "ts" (epoch seconds as a float: the encoder is passed explicitly, so
// controller-runtime's RFC3339 default never applies), "logger" (the logr
// name, omitted when empty), "caller" (short file:line of the real call site
// in llm-d-router v0.10.0), "msg", the logger's WithValues pairs, the call's
// pairs, "error" for Error, and "stacktrace" for Error (the stacktrace level
// is error in production mode).
//
// The EPP writes to stderr: controller-runtime's zap destination defaults to
// os.Stderr and the EPP never sets another.
package zaplog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// Verbosity levels (pkg/common/observability/logging/const.go).
const (
	Default = 2
	Verbose = 3
	Debug   = 4
	Trace   = 5
)

// Site is the source location a line claims, as zap's ShortCallerEncoder
// prints it ("runner/runner.go:214").
type Site string

// Sink is the shared writer: one line per Write, serialised.
type Sink struct {
	mu  sync.Mutex
	w   io.Writer
	v   int
	now func() time.Time
}

// NewSink writes to w with verbosity v (the --v flag; info lines are V(0)).
func NewSink(w io.Writer, v int) *Sink { return &Sink{w: w, v: v, now: time.Now} }

// SetVerbosity changes the level as InitLogging does after flag parsing.
func (s *Sink) SetVerbosity(v int) {
	s.mu.Lock()
	s.v = v
	s.mu.Unlock()
}

// Enabled reports whether V(level) lines are written.
func (s *Sink) Enabled(level int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return level <= s.v
}

// Logger is a named logger with context pairs (logr's WithName/WithValues).
type Logger struct {
	sink  *Sink
	name  string
	pairs []any
	level int
}

// Logger returns the root logger (no name) of s.
func (s *Sink) Logger() Logger { return Logger{sink: s} }

// WithName appends a name segment ("setup", "setup.trace").
func (l Logger) WithName(n string) Logger {
	if l.name != "" {
		n = l.name + "." + n
	}
	l.name = n
	return l
}

// WithValues adds context pairs written after msg on every line.
func (l Logger) WithValues(kv ...any) Logger {
	l.pairs = append(append([]any{}, l.pairs...), kv...)
	return l
}

// V returns a logger for verbosity level n.
func (l Logger) V(n int) Logger {
	l.level = n
	return l
}

// Enabled reports whether this logger's level is written.
func (l Logger) Enabled() bool { return l.sink != nil && l.sink.Enabled(l.level) }

// Info writes an info line (or a V(n) line) claimed by site.
func (l Logger) Info(site Site, msg string, kv ...any) {
	if !l.Enabled() {
		return
	}
	l.write(levelName(l.level), site, msg, kv, nil)
}

// Error writes an error line with "error" and "stacktrace" whatever the
// verbosity (logr's Error ignores V). err may be nil; zap then omits the key.
func (l Logger) Error(site Site, err error, msg string, kv ...any) {
	if l.sink == nil {
		return
	}
	l.write("error", site, msg, kv, err)
}

// levelName is the EPP's customLevelEncoder for a logr V level.
func levelName(v int) string {
	switch {
	case v <= 0:
		return "info"
	case v <= Verbose:
		return "info"
	case v == Debug:
		return "debug"
	default:
		return "trace"
	}
}

func (l Logger) write(level string, site Site, msg string, kv []any, err error) {
	var b bytes.Buffer
	b.WriteString(`{"level":`)
	writeJSON(&b, level)
	b.WriteString(`,"ts":`)
	now := l.sink.now()
	b.WriteString(strconv.FormatFloat(float64(now.UnixNano())/float64(time.Second), 'f', -1, 64))
	if l.name != "" {
		b.WriteString(`,"logger":`)
		writeJSON(&b, l.name)
	}
	b.WriteString(`,"caller":`)
	writeJSON(&b, string(site))
	b.WriteString(`,"msg":`)
	writeJSON(&b, msg)
	writePairs(&b, l.pairs)
	writePairs(&b, kv)
	if err != nil {
		b.WriteString(`,"error":`)
		writeJSON(&b, err.Error())
	}
	if level == "error" {
		// zap captures the goroutine stack at error level; the frames are the
		// real binary's and cannot be reproduced, so the key carries the call
		// site the stack would start at.
		b.WriteString(`,"stacktrace":`)
		writeJSON(&b, "github.com/llm-d/llm-d-router/"+string(site))
	}
	b.WriteString("}\n")
	l.sink.mu.Lock()
	_, _ = l.sink.w.Write(b.Bytes())
	l.sink.mu.Unlock()
}

func writePairs(b *bytes.Buffer, kv []any) {
	for i := 0; i+1 < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			k = fmt.Sprint(kv[i])
		}
		b.WriteByte(',')
		writeJSON(b, k)
		b.WriteByte(':')
		writeValue(b, kv[i+1])
	}
}

// writeValue encodes a value as zap.Any does for the types the EPP logs:
// strings as strings, fmt.Stringer through String() (zap's Stringer case
// precedes reflection), errors through Error(), everything else reflected
// through encoding/json with HTML escaping off.
func writeValue(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case string:
		writeJSON(b, x)
	case error:
		writeJSON(b, x.Error())
	case time.Duration:
		// zap's production config encodes durations in seconds.
		b.WriteString(strconv.FormatFloat(x.Seconds(), 'f', -1, 64))
	case fmt.Stringer:
		writeJSON(b, x.String())
	default:
		writeJSON(b, x)
	}
}

func writeJSON(b *bytes.Buffer, v any) {
	if s, ok := v.(string); ok {
		writeString(b, s)
		return
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeJSON(b, fmt.Sprintf("%v", v))
		return
	}
	// Encoder appends a newline.
	b.Truncate(b.Len() - 1)
}

// writeString is zap's JSON string escaping: quotes, backslash and control
// characters escaped, everything else (HTML included) written as is.
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
