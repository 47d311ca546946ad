package progress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// Serve makes a FIFO at path and calls handle with every event written to
// it, from one goroutine, until stop, which closes and removes the FIFO and
// returns once handle is no longer called.
func Serve(path string, handle func(Event)) (stop func(), err error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("progress: making the FIFO %s: %w", path, err)
	}
	// Read-write, so that the FIFO always has a writer (no EOF between the
	// processes' writes) and a reader (their opens succeed).
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("progress: opening the FIFO %s: %w", path, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, maxLine), 2*maxLine)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				handle(e)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			// A FIFO is pollable: Close ends the blocked read.
			f.Close()
			<-done
			os.Remove(path)
		})
	}, nil
}

// Display writes the suite's output and, below it, the traffic of every
// running spec. On a terminal that is one status line redrawn in place
// (carriage return, erase line); elsewhere (a CI log) it is a plain line per
// spec every Every while its traffic runs, and one when it ends.
// Display is safe for concurrent use: the suite's output and the events
// arrive from different goroutines.
type Display struct {
	mu  sync.Mutex
	out io.Writer
	tty bool
	// Every is the interval between plain lines of one spec's traffic.
	every time.Duration
	// Width is the terminal's width in columns (0: 120).
	width func() int
	now   func() time.Time

	active  map[int]Event     // by Ginkgo process
	printed map[int]time.Time // plain mode: when each process's spec last printed
	drawn   bool              // a status line is on screen
	midLine bool              // the last output did not end its line
}

// NewDisplay writes to out; tty selects the in-place status line. width
// may be nil.
func NewDisplay(out io.Writer, tty bool, every time.Duration, width func() int) *Display {
	if width == nil {
		width = func() int { return 0 }
	}
	return &Display{out: out, tty: tty, every: every, width: width, now: time.Now,
		active: map[int]Event{}, printed: map[int]time.Time{}}
}

// Event records e and shows it.
func (d *Display) Event(e Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	prev, had := d.active[e.Proc]
	if e.Final {
		delete(d.active, e.Proc)
	} else {
		d.active[e.Proc] = e
	}
	if d.tty {
		d.redraw()
		return
	}
	last, seen := d.printed[e.Proc]
	if !seen || had && prev.Spec != e.Spec {
		// A new spec on this process: its lines come every Every from
		// now, and at its end; a short run prints only its end.
		d.printed[e.Proc] = d.now()
		last = d.now()
	}
	if e.Final || d.now().Sub(last) >= d.every {
		d.printed[e.Proc] = d.now()
		if e.Final {
			delete(d.printed, e.Proc)
		}
		if d.midLine {
			fmt.Fprintln(d.out)
			d.midLine = false
		}
		fmt.Fprintf(d.out, "traffic [process %d] %s\n", e.Proc, e)
	}
}

// Write passes the suite's output through, keeping the status line below it.
func (d *Display) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.erase()
	n, err := d.out.Write(p)
	if len(p) > 0 {
		d.midLine = p[len(p)-1] != '\n'
	}
	if d.tty && !d.midLine {
		d.redraw()
	}
	return n, err
}

// Printf writes a line of the caller's own between the suite's output and
// the status line.
func (d *Display) Printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.erase()
	if d.midLine {
		fmt.Fprintln(d.out)
		d.midLine = false
	}
	fmt.Fprintf(d.out, format, args...)
	if d.tty {
		d.redraw()
	}
}

// Close erases the status line.
func (d *Display) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.erase()
	d.active = map[int]Event{}
}

func (d *Display) erase() {
	if d.drawn {
		io.WriteString(d.out, "\r\x1b[K")
		d.drawn = false
	}
}

// redraw puts the running specs' traffic on one line, cut to the width.
func (d *Display) redraw() {
	if d.midLine {
		return
	}
	d.erase()
	if len(d.active) == 0 {
		return
	}
	procs := make([]int, 0, len(d.active))
	for p := range d.active {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	var parts []string
	for _, p := range procs {
		parts = append(parts, d.active[p].String())
	}
	line := "traffic " + strings.Join(parts, " | ")
	w := d.width()
	if w <= 0 {
		w = 120
	}
	if utf8.RuneCountInString(line) >= w {
		line = string([]rune(line)[:w-2]) + "…"
	}
	io.WriteString(d.out, line)
	d.drawn = true
}
