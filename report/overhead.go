package report

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/traffic/overhead"
)

// config.EnvDriverOverhead names the file (written by cmd/e2e before the
// suite starts) that holds the traffic driver's overhead measured on this
// machine for this run; Write reads it and states the bound beside every
// latency table. Without it the tables say that they carry no measured
// bound.

// FileDriverOverhead is where cmd/e2e writes that measurement.
const FileDriverOverhead = "driver-overhead.json"

// DriverOverhead is how much of the latencies and TTFTs the report shows is
// the traffic driver's own: measured at the start of the run, on the machine
// that ran the driver, against a paced server in a process of its own
// (traffic/overhead), at the concurrency levels of the run.
type DriverOverhead struct {
	// Measured is the measurement; nil when none was made.
	Measured *overhead.Result `json:"measured,omitempty"`
	// How says how it was measured, in words.
	How string `json:"how,omitempty"`
	// NotMeasured says why there is no measurement.
	NotMeasured string `json:"notMeasured,omitempty"`
	// Caveat qualifies the bound for this run's target.
	Caveat string `json:"caveat,omitempty"`
}

// LevelBound is the driver's overhead at one concurrency level: every TTFT
// and latency figure of the level is at most the max above what the server
// side took (its p99 is what most requests carried).
type LevelBound struct {
	TTFTMaxMs    float64 `json:"ttftMaxMs"`
	TTFTP99Ms    float64 `json:"ttftP99Ms"`
	LatencyMaxMs float64 `json:"latencyMaxMs"`
	LatencyP99Ms float64 `json:"latencyP99Ms"`
}

func (b *LevelBound) String() string {
	if b == nil {
		return "not measured"
	}
	return fmt.Sprintf("≤ %s / ≤ %s (p99 %s / %s)", formatMs(b.TTFTMaxMs), formatMs(b.LatencyMaxMs), formatMs(b.TTFTP99Ms), formatMs(b.LatencyP99Ms))
}

// HowMeasured is the sentence a measurement made by cmd/e2e carries.
func HowMeasured(r overhead.Result) string {
	return fmt.Sprintf("measured at the start of this run (%s) on the machine that ran the traffic driver (%s): the driver against a paced server in a process of its own (first token after %s, %d more chunks %s apart), %s traffic, each request's figures minus the server's own",
		r.MeasuredAt.UTC().Format(time.RFC3339), r.Machine, time.Duration(r.Shape.FirstToken), r.Shape.Chunks, time.Duration(r.Shape.Gap), r.Mode)
}

// simCaveat: on the sim the routers and engines share the suite's process.
const simCaveat = "on the sim the routers and engines run in the suite's own process and share its CPUs and garbage collector with the driver, which the separate-process measurement does not: there the bound understates the driver's share (and sim latencies are no GPU measurement)"

// readDriverOverhead reads the file config.EnvDriverOverhead names; a
// missing variable or file is a DriverOverhead that says so.
func readDriverOverhead() *DriverOverhead {
	path := os.Getenv(config.EnvDriverOverhead)
	if path == "" {
		return &DriverOverhead{NotMeasured: "the suite ran without make e2e's driver calibration (" + config.EnvDriverOverhead + " unset)"}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return &DriverOverhead{NotMeasured: "the driver calibration's file is unreadable: " + err.Error()}
	}
	var d DriverOverhead
	if err := json.Unmarshal(b, &d); err != nil {
		return &DriverOverhead{NotMeasured: fmt.Sprintf("the driver calibration's file %s is not valid: %v", path, err)}
	}
	return &d
}

// attachDriverOverhead records d and puts each sweep level's bound beside
// its figures.
func (r *Report) attachDriverOverhead(d *DriverOverhead) {
	if d == nil {
		return
	}
	if r.Environment.Target == config.TargetSim && d.Caveat == "" {
		d.Caveat = simCaveat
	}
	r.DriverOverhead = d
	for i := range r.Sweeps {
		for j := range r.Sweeps[i].Levels {
			l := &r.Sweeps[i].Levels[j]
			l.DriverBound = nil
			if d.Measured == nil {
				continue
			}
			if m, ok := d.Measured.Level(l.Concurrency); ok {
				l.DriverBound = &LevelBound{TTFTMaxMs: ms(m.TTFT.Max), TTFTP99Ms: ms(m.TTFT.P99),
					LatencyMaxMs: ms(m.Latency.Max), LatencyP99Ms: ms(m.Latency.P99)}
			}
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BoundNote is the sentence beside a latency table: where its bound comes
// from, or that it has none.
func (d *DriverOverhead) BoundNote() string {
	if d == nil {
		return "Driver overhead: not measured; these latencies carry no measured bound."
	}
	var b strings.Builder
	if d.Measured == nil {
		fmt.Fprintf(&b, "Driver overhead: not measured (%s); these latencies carry no measured bound.", d.NotMeasured)
	} else {
		fmt.Fprintf(&b, "Driver overhead bound (TTFT / latency, ms): each figure of a level is at most this much above what the server side took; %s.", d.How)
	}
	if d.Caveat != "" {
		fmt.Fprintf(&b, " Note: %s.", d.Caveat)
	}
	return b.String()
}

// DriverBoundNote is r.DriverOverhead.BoundNote, for the HTML template
// (which cannot call a method on a nil pointer).
func (r *Report) DriverBoundNote() string { return r.DriverOverhead.BoundNote() }
