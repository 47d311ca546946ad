package overhead

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/traffic"
)

// The server keeps its shape and times itself; the driver's figures for the
// same requests are never below the server's, so every overhead is >= 0.
// (Here the server runs in the test's process: the test checks the join and
// the arithmetic, not the figures, which bench/overhead.sh measures with the
// server in a process of its own.)
func TestMeasureJoinsEveryRequestWithTheServersTiming(t *testing.T) {
	shape := Shape{FirstToken: 4 * time.Millisecond, Chunks: 3, Gap: time.Millisecond}
	srv := httptest.NewServer(NewServer(shape))
	defer srv.Close()
	res, err := Measure(t.Context(), Options{ServerURL: srv.URL, Shape: shape, Levels: []int{1, 4},
		Requests: func(c int) int { return 8 * c }, Mode: traffic.ModeAlternate, PrefixChars: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Levels) != 2 || res.Levels[0].Concurrency != 1 || res.Levels[1].Requests != 32 {
		t.Fatalf("levels %+v", res.Levels)
	}
	for _, l := range res.Levels {
		if l.ServerTTFT < shape.FirstToken || l.ServerLatency < shape.FirstToken+3*shape.Gap {
			t.Errorf("c=%d: the server's own p50s %v / %v are shorter than its shape", l.Concurrency, l.ServerTTFT, l.ServerLatency)
		}
		for name, b := range map[string]Bound{"TTFT": l.TTFT, "latency": l.Latency} {
			if b.P50 < 0 || b.P50 > b.P99 || b.P99 > b.Max || b.Max <= 0 {
				t.Errorf("c=%d %s overhead %+v: want 0 <= p50 <= p99 <= max, max > 0", l.Concurrency, name, b)
			}
		}
	}
	if lvl, ok := res.Level(4); !ok || lvl.Concurrency != 4 {
		t.Error("Level(4) not found")
	}
	if _, ok := res.Level(3); ok {
		t.Error("Level(3) found")
	}
}

func TestJoinSubtractsTheServersTimingPerRequest(t *testing.T) {
	results := []traffic.Result{
		{Index: 0, Stream: true, TTFT: 12 * time.Millisecond, Latency: 30 * time.Millisecond},
		{Index: 1, Latency: 27 * time.Millisecond},
	}
	timings := map[int]Timing{
		10: {TTFT: 10 * time.Millisecond, Latency: 26 * time.Millisecond},
		11: {Latency: 26 * time.Millisecond},
	}
	l, err := Join(results, 10, timings)
	if err != nil {
		t.Fatal(err)
	}
	if l.TTFT.Max != 2*time.Millisecond || l.Latency.Max != 4*time.Millisecond || l.Latency.P50 != time.Millisecond {
		t.Errorf("got %+v", l)
	}
	delete(timings, 11)
	if _, err := Join(results, 10, timings); err == nil || !strings.Contains(err.Error(), "request 11") {
		t.Errorf("a request the server did not time: %v", err)
	}
}

func TestMedianTakesEachFigureAcrossRounds(t *testing.T) {
	round := func(p99 time.Duration) Result {
		return Result{Levels: []Level{{Concurrency: 64, TTFT: Bound{P99: p99}, Latency: Bound{P99: p99}}}}
	}
	m := Median([]Result{round(9 * time.Millisecond), round(time.Millisecond), round(2 * time.Millisecond)})
	if got := m.Levels[0].TTFT.P99; got != 2*time.Millisecond {
		t.Errorf("median p99 %v, want 2ms", got)
	}
}

// StartProcess waits for the address file and Stop ends the process; a
// command that exits first is reported with its output.
func TestStartProcessReportsAServerThatExits(t *testing.T) {
	_, err := StartProcess(context.Background(), "sh", "-c", "echo no such flag >&2; exit 3", "--")
	if err == nil || !strings.Contains(err.Error(), "no such flag") {
		t.Errorf("got %v, want the server's own words", err)
	}
}
