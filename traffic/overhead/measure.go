// Package overhead measures how much of the TTFT and latency the traffic
// driver reports is the driver's own. A paced streaming server in another
// process (Serve) records, per request, when its handler started, when it
// flushed the first token and when it flushed the last byte. Measure runs the
// driver (traffic.Run, as the suite runs it) at each concurrency level
// against it, joins the two by a request header, and reports the driver's
// figures minus the server's: what the client side added (the driver, the
// loopback and the server's HTTP parsing), as p50, p99 and max per level.
//
// Every figure the driver reports for a request is at least the server-side
// time and at most that plus the request's overhead, so each percentile of a
// level is off by at most the level's maximum overhead: that is the bound a
// report states beside its latency tables.
package overhead

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/traffic"
)

// Bound is the overhead of one level: nearest-rank p50 and p99, and max.
type Bound struct {
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Level is the driver's overhead at one concurrency.
type Level struct {
	Concurrency int `json:"concurrency"`
	Requests    int `json:"requests"`
	// TTFT covers the streamed requests, Latency every request.
	TTFT    Bound `json:"ttft"`
	Latency Bound `json:"latency"`
	// ServerTTFT and ServerLatency are the server's own p50s: the shape
	// it kept, for the reader to compare with the overhead.
	ServerTTFT    time.Duration `json:"server_ttft_p50_ns"`
	ServerLatency time.Duration `json:"server_latency_p50_ns"`
	// RequestsPerSecond is the driver's rate at this level.
	RequestsPerSecond float64 `json:"requests_per_second"`
	// AllocPerRequest is what the process allocated during the level per
	// request, and GCCycles the collections that ran meanwhile: the
	// levers on the tail.
	AllocPerRequest int64 `json:"alloc_bytes_per_request"`
	GCCycles        int64 `json:"gc_cycles"`
}

// Machine says where a measurement ran.
type Machine struct {
	Hostname   string `json:"hostname,omitempty"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model,omitempty"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
}

// String is the machine in a few words: "2 CPUs (Intel Xeon ...), go1.26.8 linux/amd64".
func (m Machine) String() string {
	s := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	if m.GOMAXPROCS != m.CPUs {
		s += fmt.Sprintf(", GOMAXPROCS %d", m.GOMAXPROCS)
	}
	return s + ", " + m.GoVersion + " " + m.OS
}

// ThisMachine describes the machine the caller runs on.
func ThisMachine() Machine {
	host, _ := os.Hostname()
	return Machine{
		Hostname:   host,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPUModel:   cpuModel(),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// cpuModel is the first "model name" of /proc/cpuinfo, empty elsewhere.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.Join(strings.Fields(value), " ")
		}
	}
	return ""
}

// Result is one measurement: where and when, against what, and per level.
type Result struct {
	MeasuredAt time.Time    `json:"measured_at"`
	Machine    Machine      `json:"machine"`
	Shape      ShapeJSON    `json:"server_shape"`
	Mode       traffic.Mode `json:"mode"`
	Levels     []Level      `json:"levels"`
}

// ShapeJSON is a Shape as report data.
type ShapeJSON struct {
	FirstToken time.Duration `json:"first_token_ns"`
	Chunks     int           `json:"chunks"`
	Gap        time.Duration `json:"gap_ns"`
}

// Level returns the result's level for concurrency c.
func (r Result) Level(c int) (Level, bool) {
	for _, l := range r.Levels {
		if l.Concurrency == c {
			return l, true
		}
	}
	return Level{}, false
}

// Options say what Measure runs.
type Options struct {
	// ServerURL is the paced server's root, e.g. http://127.0.0.1:41234.
	ServerURL string
	// Shape is what the server was started with (recorded, not sent).
	Shape Shape
	// Levels are the concurrency levels, in order.
	Levels []int
	// Requests is how many requests a level sends (default
	// DefaultRequests).
	Requests func(concurrency int) int
	// Mode is the driver's mode (default traffic.ModeStream); the
	// concurrency claim's traffic is traffic.ModeAlternate.
	Mode traffic.Mode
	// PrefixChars and MaxTokens shape the requests as the suite's do
	// (defaults: traffic's, and 16).
	PrefixChars int
	MaxTokens   int
}

// DefaultRequests sends enough requests for a p99 that is not the maximum
// (at least 400), and 32 rounds of the level's workers.
func DefaultRequests(concurrency int) int { return max(400, 32*concurrency) }

// Measure runs the driver at each level against the paced server and
// returns its overhead per level. A level in which a request failed, or
// whose requests the server did not all time, is an error.
func Measure(ctx context.Context, o Options) (Result, error) {
	if o.Requests == nil {
		o.Requests = DefaultRequests
	}
	if o.Mode == "" {
		o.Mode = traffic.ModeStream
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = 16
	}
	res := Result{MeasuredAt: time.Now().UTC(), Machine: ThisMachine(), Mode: o.Mode,
		Shape: ShapeJSON{FirstToken: o.Shape.FirstToken, Chunks: o.Shape.Chunks, Gap: o.Shape.Gap}}
	for _, c := range o.Levels {
		l, err := measureLevel(ctx, o, c)
		if err != nil {
			return res, err
		}
		res.Levels = append(res.Levels, l)
	}
	return res, nil
}

func measureLevel(ctx context.Context, o Options, c int) (Level, error) {
	n := o.Requests(c)
	plan := traffic.Plan{
		BaseURL:     strings.TrimRight(o.ServerURL, "/") + "/v1",
		Model:       "overhead",
		Requests:    n,
		Concurrency: c,
		Mode:        o.Mode,
		MaxTokens:   o.MaxTokens,
		Prompts:     traffic.PromptSet{Kind: traffic.PromptsSharedPrefix, PrefixChars: o.PrefixChars},
		Headers:     map[string]string{KeyHeader: "{nonce}:{index}"},
	}
	alloc0, gc0 := gcCounters()
	rep, err := traffic.Run(ctx, plan)
	alloc1, gc1 := gcCounters()
	if err != nil {
		return Level{}, fmt.Errorf("overhead: concurrency %d: %w", c, err)
	}
	if rep.Summary.OK != n {
		return Level{}, fmt.Errorf("overhead: concurrency %d: %d of %d requests failed: %v", c, n-rep.Summary.OK, n, rep.Summary.ByClass)
	}
	timings, err := fetchTimings(ctx, o.ServerURL, rep.Plan.Prompts.Nonce, n)
	if err != nil {
		return Level{}, fmt.Errorf("overhead: concurrency %d: %w", c, err)
	}
	l, err := Join(rep.Results, rep.Plan.FirstIndex, timings)
	if err != nil {
		return Level{}, fmt.Errorf("overhead: concurrency %d: %w", c, err)
	}
	l.Concurrency = c
	l.RequestsPerSecond = rep.Summary.RequestsPerSecond
	l.AllocPerRequest = int64(alloc1-alloc0) / int64(n)
	l.GCCycles = int64(gc1 - gc0)
	return l, nil
}

// gcCounters reads the bytes allocated and the GC cycles completed so far
// (runtime/metrics, which does not stop the world).
func gcCounters() (allocBytes, cycles uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		allocBytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		cycles = s[1].Value.Uint64()
	}
	return allocBytes, cycles
}

// Join computes the overhead of results against the server's timings,
// keyed by prompt number (firstIndex + the result's index).
func Join(results []traffic.Result, firstIndex int, timings map[int]Timing) (Level, error) {
	var ttft, lat, serverTTFT, serverLat []time.Duration
	for _, r := range results {
		t, ok := timings[firstIndex+r.Index]
		if !ok {
			return Level{}, fmt.Errorf("the server has no timing of request %d (header %s not received?)", firstIndex+r.Index, KeyHeader)
		}
		lat = append(lat, r.Latency-t.Latency)
		serverLat = append(serverLat, t.Latency)
		if r.Stream {
			ttft = append(ttft, r.TTFT-t.TTFT)
			serverTTFT = append(serverTTFT, t.TTFT)
		}
	}
	return Level{
		Requests:      len(results),
		TTFT:          bound(ttft),
		Latency:       bound(lat),
		ServerTTFT:    traffic.NewStats(serverTTFT).P50,
		ServerLatency: traffic.NewStats(serverLat).P50,
	}, nil
}

func bound(ds []time.Duration) Bound {
	s := traffic.NewStats(ds)
	return Bound{P50: s.P50, P99: s.P99, Max: s.Max}
}

func fetchTimings(ctx context.Context, serverURL, run string, n int) (map[int]Timing, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(serverURL, "/")+TimingsPath+"?run="+run+"&n="+strconv.Itoa(n), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the server's timings: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the server's timings: HTTP %d", resp.StatusCode)
	}
	var t map[int]Timing
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return nil, fmt.Errorf("reading the server's timings: %w", err)
	}
	return t, nil
}

// Median is the per-level, per-figure median of several rounds of the same
// levels (the rounds' levels in the same order).
func Median(rounds []Result) Result {
	if len(rounds) == 0 {
		return Result{}
	}
	out := rounds[0]
	out.Levels = slices.Clone(out.Levels)
	for i := range out.Levels {
		pick := func(f func(Level) time.Duration) time.Duration {
			var v []time.Duration
			for _, r := range rounds {
				v = append(v, f(r.Levels[i]))
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		l := &out.Levels[i]
		l.TTFT = Bound{P50: pick(func(l Level) time.Duration { return l.TTFT.P50 }), P99: pick(func(l Level) time.Duration { return l.TTFT.P99 }), Max: pick(func(l Level) time.Duration { return l.TTFT.Max })}
		l.Latency = Bound{P50: pick(func(l Level) time.Duration { return l.Latency.P50 }), P99: pick(func(l Level) time.Duration { return l.Latency.P99 }), Max: pick(func(l Level) time.Duration { return l.Latency.Max })}
		l.ServerTTFT = pick(func(l Level) time.Duration { return l.ServerTTFT })
		l.ServerLatency = pick(func(l Level) time.Duration { return l.ServerLatency })
		var rps []float64
		for _, r := range rounds {
			rps = append(rps, r.Levels[i].RequestsPerSecond)
		}
		slices.Sort(rps)
		l.RequestsPerSecond = rps[len(rps)/2]
		l.AllocPerRequest = int64(pick(func(l Level) time.Duration { return time.Duration(l.AllocPerRequest) }))
		l.GCCycles = int64(pick(func(l Level) time.Duration { return time.Duration(l.GCCycles) }))
	}
	return out
}
