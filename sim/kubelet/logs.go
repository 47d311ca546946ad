package kubelet

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// maxLogBytes bounds one container instance's log, as the kubelet's log
// rotation does (10 MiB by default); the oldest lines go first.
const maxLogBytes = 10 << 20

// LogLine is one line a container wrote, for Options.LogSink.
type LogLine struct {
	Time      time.Time
	Namespace string
	Pod       string
	Container string
	// Stream is "stdout" or "stderr".
	Stream string
	// Text is the line without its newline (ANSI escapes kept).
	Text string
}

type logEntry struct {
	t    time.Time
	text string // with its trailing newline, unless it is a final partial line
}

// logBuffer is one container instance's log as kubectl logs shows it: stdout
// and stderr interleaved in write order, each line stamped when it ended.
type logBuffer struct {
	mu      sync.Mutex
	entries []logEntry
	size    int
	partial map[string]*bytes.Buffer
	sink    func(stream, text string, t time.Time)
}

func newLogBuffer(sink func(stream, text string, t time.Time)) *logBuffer {
	return &logBuffer{partial: map[string]*bytes.Buffer{}, sink: sink}
}

type streamWriter struct {
	b      *logBuffer
	stream string
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.b.write(w.stream, p)
	return len(p), nil
}

func (b *logBuffer) write(stream string, p []byte) {
	now := time.Now()
	var done []string
	b.mu.Lock()
	part := b.partial[stream]
	if part == nil {
		part = new(bytes.Buffer)
		b.partial[stream] = part
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			part.Write(p)
			break
		}
		part.Write(p[:i+1])
		line := part.String()
		part.Reset()
		p = p[i+1:]
		b.entries = append(b.entries, logEntry{t: now, text: line})
		b.size += len(line)
		done = append(done, line)
	}
	for b.size > maxLogBytes && len(b.entries) > 1 {
		b.size -= len(b.entries[0].text)
		b.entries = b.entries[1:]
	}
	sink := b.sink
	b.mu.Unlock()
	if sink != nil {
		for _, l := range done {
			sink(stream, strings.TrimSuffix(l, "\n"), now)
		}
	}
}

// text returns the log from since on (zero = all); a line still being
// written is included, as kubectl logs includes it.
func (b *logBuffer) text(since time.Time) string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for _, e := range b.entries {
		if !since.IsZero() && e.t.Before(since) {
			continue
		}
		sb.WriteString(e.text)
	}
	for _, stream := range []string{"stdout", "stderr"} {
		if p := b.partial[stream]; p != nil && p.Len() > 0 {
			sb.Write(p.Bytes())
		}
	}
	return sb.String()
}
