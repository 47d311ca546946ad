package difftest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpustack/routing-conformance/api"
	"github.com/gpustack/routing-conformance/metrics"
)

// Scrape is the router's /metrics now.
func (r *Router) Scrape(ctx context.Context) (metrics.Snapshot, error) {
	return metrics.Scrape(ctx, "http://"+r.Pod.IP+":"+strconv.Itoa(api.RouterMetricsPort)+"/metrics",
		metrics.WithTimeout(5*time.Second), metrics.WithSource(r.Impl))
}

// Exclusion leaves series out of the comparison, and says why: those of
// Family (every one, or only those whose labels carry Labels).
type Exclusion struct {
	Family string
	Labels map[string]string
	Why    string
}

// Exclusions are the series the two runs cannot agree on by construction;
// every other family and series must match. Families are compared by name,
// TYPE and HELP; their series by label set, counters and the _count of
// histograms and summaries by their change over the sequence, gauges by
// their value after it. Histogram buckets, sums and summary quantiles are
// timings, never compared.
var Exclusions = []Exclusion{
	{Family: "smg_discovery_registrations_total", Why: staticWorkers},
	{Family: "smg_discovery_workers_discovered", Why: staticWorkers},
	{Family: "smg_discovery_deregistrations_total", Why: staticWorkers},
	{Family: "smg_discovery_sync_duration_seconds", Why: staticWorkers},
	{Family: "smg_http_requests_total", Labels: map[string]string{"method": "POST", "path": "/workers"}, Why: staticWorkers},
	{Family: "smg_http_request_duration_seconds", Labels: map[string]string{"method": "POST", "path": "/workers"}, Why: staticWorkers},
	{Family: "smg_http_responses_total", Labels: map[string]string{"status_code": "202"}, Why: staticWorkers + " (POST /workers answers 202)"},
	{Family: "smg_http_inflight_request_age_count", Why: "sampled every 20 s from the router's start: whether a sample falls inside a case, and what is in flight at that instant, is timing"},
}

const staticWorkers = "static-workers translation: the upstream gateway's workers come through POST /workers, the emulated one's through Kubernetes discovery"

// excluded reports whether the whole family is left out.
func excluded(family string) bool {
	return slices.ContainsFunc(Exclusions, func(e Exclusion) bool { return e.Family == family && e.Labels == nil })
}

// excludedSeries reports whether one series of family is left out.
func excludedSeries(family string, labels map[string]string) bool {
	return slices.ContainsFunc(Exclusions, func(e Exclusion) bool {
		if e.Family != family {
			return false
		}
		for k, v := range e.Labels {
			if labels[k] != v {
				return false
			}
		}
		return true
	})
}

// series is one compared value: a family's flattened sample with worker
// URLs replaced by candidate positions.
type series struct {
	family, key string
	kind        string // delta or value
	v           float64
}

// MetricsView reduces a router's before/after scrapes to what is compared.
// aggregate sums series that differ only in a worker label (random
// policies, whose per-worker counts cannot match).
func (d *Deployment) MetricsView(before, after metrics.Snapshot, orders map[string]Order, aggregate bool) (map[string]metrics.Family, map[string]series) {
	fams := map[string]metrics.Family{}
	for name, f := range after.Families {
		if !excluded(name) {
			fams[name] = f
		}
	}
	beforeVal := map[string]float64{}
	for _, s := range before.Samples {
		beforeVal[s.Name+"\x00"+d.labelKey(s.Labels, orders, false)] += s.Value
	}
	out := map[string]series{}
	for _, s := range after.Samples {
		fam, kind, ok := d.compared(after, s.Name)
		if !ok || excludedSeries(fam, s.Labels) {
			continue
		}
		raw := s.Name + "\x00" + d.labelKey(s.Labels, orders, false)
		key := s.Name + d.labelKey(s.Labels, orders, aggregate)
		v := s.Value
		if kind == "delta" {
			v -= beforeVal[raw]
		}
		cur := out[key]
		out[key] = series{family: fam, key: key, kind: kind, v: cur.v + v}
	}
	return fams, out
}

// compared says how a flattened sample name is compared: its family, and
// delta (counters, histogram and summary counts) or value (gauges).
func (d *Deployment) compared(snap metrics.Snapshot, name string) (string, string, bool) {
	if f, ok := snap.Families[name]; ok {
		if excluded(name) {
			return "", "", false
		}
		switch f.Type {
		case "counter":
			return name, "delta", true
		case "gauge", "untyped":
			return name, "value", true
		}
		return "", "", false // summary quantiles
	}
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if _, ok := snap.Families[base]; !ok || excluded(base) {
			return "", "", false
		}
		if suffix == "_count" {
			return base, "delta", true
		}
		return "", "", false
	}
	return "", "", false
}

// labelKey is the label set with engine URLs as candidate positions (or
// "*" when aggregate), sorted.
func (d *Deployment) labelKey(labels map[string]string, orders map[string]Order, aggregate bool) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		if e, ok := d.engineByURL(v); ok {
			v = position(orders, e.Pool, e.Label)
			if aggregate {
				v = e.Pool[:1] + "*"
			}
		}
		kv = append(kv, k+"="+strconv.Quote(v))
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// CompareMetrics tables the families and series where the two routers'
// views differ (and says whether there was none).
func CompareMetrics(emuFams, upFams map[string]metrics.Family, emu, up map[string]series) (string, bool) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	same := true
	row := func(what, e, u string) {
		if same {
			fmt.Fprintln(tw, "metric\temulated\tupstream")
		}
		same = false
		fmt.Fprintf(tw, "%s\t%s\t%s\n", what, e, u)
	}
	for _, name := range unionKeys(keysOf(emuFams), keysOf(upFams)) {
		e, eok := emuFams[name]
		u, uok := upFams[name]
		switch {
		case !eok:
			row("family "+name, "(absent)", u.Type+": "+u.Help)
		case !uok:
			row("family "+name, e.Type+": "+e.Help, "(absent)")
		case e.Type != u.Type || e.Help != u.Help:
			row("family "+name, e.Type+": "+e.Help, u.Type+": "+u.Help)
		}
	}
	for _, key := range unionKeys(keysOf(emu), keysOf(up)) {
		e, eok := emu[key]
		u, uok := up[key]
		val := func(s series, ok bool) string {
			if !ok {
				return "(absent)"
			}
			if s.kind == "delta" {
				return "Δ" + metrics.FormatValue(s.v)
			}
			return "=" + metrics.FormatValue(s.v)
		}
		if eok != uok || e.v != u.v {
			row(key, val(e, eok), val(u, uok))
		}
	}
	_ = tw.Flush()
	return b.String(), same
}

func keysOf[V any](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}
