package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEventsCrossTheFIFOFromConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress")
	var mu sync.Mutex
	got := map[int]int{}
	stop, err := Serve(path, func(e Event) {
		mu.Lock()
		got[e.Proc]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for proc := 1; proc <= 4; proc++ {
		wg.Go(func() {
			s := Open(path)
			if s == nil {
				t.Error("Open found no reader")
				return
			}
			defer s.Close()
			for i := range 50 {
				if err := s.Send(Event{Proc: proc, Spec: strings.Repeat("x", 100), Done: i, Total: 50}); err != nil {
					t.Errorf("send: %v", err)
				}
			}
		})
	}
	wg.Wait()
	// The reader is asynchronous: wait for every line, then stop.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := got[1] + got[2] + got[3] + got[4]
		mu.Unlock()
		if n == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	for proc := 1; proc <= 4; proc++ {
		if got[proc] != 50 {
			t.Errorf("process %d: %d of 50 events arrived whole", proc, got[proc])
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the FIFO is left behind: %v", err)
	}
}

func TestOpenWithoutAReaderIsANilSinkThatDropsEvents(t *testing.T) {
	if s := Open(""); s != nil {
		t.Fatal("a sink without a FIFO")
	}
	var s *Sink
	if err := s.Send(Event{}); err != nil || s.Close() != nil {
		t.Error("a nil sink must drop events quietly")
	}
	// A FIFO nobody reads: open fails rather than blocking the spec.
	path := filepath.Join(t.TempDir(), "orphan")
	stop, err := Serve(path, func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if s := Open(path); s != nil {
		t.Error("opened a FIFO that no longer exists")
	}
}

func TestAnOversizedEventIsShortenedToOneAtomicLine(t *testing.T) {
	b, err := encode(Event{Spec: strings.Repeat("y", 3*maxLine)})
	if err != nil || len(b) >= maxLine || !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Errorf("%d bytes, %v", len(b), err)
	}
}

func TestTerminalDisplayRedrawsOneLineBelowTheOutput(t *testing.T) {
	var out bytes.Buffer
	d := NewDisplay(&out, true, time.Second, func() int { return 60 })
	d.Event(Event{Proc: 1, Spec: "affinity vllm-router+vLLM", Done: 10, Total: 120, Elapsed: time.Second})
	d.Write([]byte("• [PASSED] defaults\n"))
	d.Event(Event{Proc: 1, Spec: "affinity vllm-router+vLLM", Done: 120, Total: 120, Elapsed: 2 * time.Second, Final: true})
	d.Close()
	want := "traffic affinity vllm-router+vLLM: 10/120 requests, 0 erro…" + // cut to the width
		"\r\x1b[K• [PASSED] defaults\n" + // erased before the output, redrawn after it
		"traffic affinity vllm-router+vLLM: 10/120 requests, 0 erro…" +
		"\r\x1b[K" // the final event clears the line
	if out.String() != want {
		t.Errorf("terminal output\n got %q\nwant %q", out.String(), want)
	}
}

func TestPlainDisplayPrintsPeriodicLines(t *testing.T) {
	var out bytes.Buffer
	d := NewDisplay(&out, false, 10*time.Second, nil)
	now := time.Unix(0, 0)
	d.now = func() time.Time { return now }
	e := Event{Proc: 2, Spec: "roundrobin sglang-gateway+SGLang", Total: 120, Elapsed: time.Second}
	for i := range 30 { // 30 events over 15 s: only the one at 10 s
		e.Done = i
		d.Event(e)
		now = now.Add(500 * time.Millisecond)
	}
	d.Write([]byte("partial"))
	e.Done, e.Final, e.Elapsed = 120, true, 4*time.Second
	d.Event(e)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "traffic [process 2] roundrobin sglang-gateway+SGLang: 20/120 requests") ||
		lines[1] != "partial" ||
		lines[2] != "traffic [process 2] roundrobin sglang-gateway+SGLang: 120/120 requests, 0 errors, 30.0 req/s, done in 4s" {
		t.Errorf("plain output:\n%s", out.String())
	}
	if strings.Contains(out.String(), "\r") {
		t.Error("carriage returns in a log")
	}
}

func TestPlainDisplayGivesAShortRunOnlyItsEndLine(t *testing.T) {
	var out bytes.Buffer
	d := NewDisplay(&out, false, 10*time.Second, nil)
	now := time.Unix(0, 0)
	d.now = func() time.Time { return now }
	for _, spec := range []string{"manual sglang-gateway+SGLang", "random vllm-router+vLLM"} {
		e := Event{Proc: 1, Spec: spec, Total: 4}
		for i := range 4 {
			e.Done = i
			d.Event(e)
			now = now.Add(3 * time.Second) // the next spec starts 12 s after the first: still no periodic line
		}
		e.Done, e.Final = 4, true
		d.Event(e)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "manual sglang-gateway+SGLang: 4/4 requests") || !strings.Contains(lines[1], "random vllm-router+vLLM: 4/4 requests") {
		t.Errorf("plain output:\n%s", out.String())
	}
}
