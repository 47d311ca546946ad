package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/internal/ansi"
)

// Describer is evidence that says itself in one line: the line shown in its
// claim row and in the spec list.
type Describer interface {
	Describe() string
}

// Charter is evidence drawn as bar charts in its claim row (SVG in the
// HTML page, block characters in the Markdown).
type Charter interface {
	Charts() []Chart
}

// SeriesSource is evidence naming metric series, as "name{label,...}"
// (label names only: values such as worker addresses change every run).
// The baseline diff lists series that appeared or vanished per pair.
type SeriesSource interface {
	SeriesKeys() []string
}

// entryTypes maps each entry name to a fresh value of its type. A new kind
// of evidence is one line here; the report renders it through the
// interfaces above, and any other entry as its JSON.
var entryTypes = map[string]func() any{
	EntryClaim:          func() any { return &Claim{} },
	EntrySplit:          func() any { return &Split{} },
	EntryMetricDelta:    func() any { return &MetricDelta{} },
	EntryBanner:         func() any { return &Banner{} },
	EntrySeries:         func() any { return &Series{} },
	EntryAdmission:      func() any { return &Admission{} },
	EntryRouterExit:     func() any { return &RouterExit{} },
	EntryDeploymentCost: func() any { return &DeploymentCost{} },
	EntrySweep:          func() any { return &Sweep{} },
	EntryPickerSeed:     func() any { return &PickerSeed{} },
	EntryDisruption:     func() any { return &Disruption{} },
	EntryRouterPods:     func() any { return &RouterPods{} },
	EntryRouterEdit:     func() any { return &RouterEdit{} },
	EntryEditGuard:      func() any { return &EditGuard{} },
}

// decodeKnown decodes an entry recorded under one of the registered names
// into a pointer to its type; other entries give nil.
func decodeKnown(e types.ReportEntry) (any, error) {
	fresh, ok := entryTypes[e.Name]
	if !ok {
		return nil, nil
	}
	v := fresh()
	return v, decodeEntry(e, v)
}

// entryLine renders any entry as one readable line, from what decodeKnown
// made of it: its Describe, else its JSON on one line.
func entryLine(e types.ReportEntry, v any, err error) string {
	switch {
	case err != nil && (e.Name == EntrySplit || e.Name == EntryClaim):
		// Missing from the claim tables and charts too.
		return fmt.Sprintf("unreadable %s entry: %v", e.Name, err)
	case err != nil:
		return fmt.Sprintf("%s: unreadable: %v", e.Name, err)
	}
	if d, ok := v.(Describer); ok {
		return stripANSI(d.Describe())
	}
	return e.Name + ": " + compactJSON(e)
}

// compactJSON is an entry's value on one line: an unregistered entry's
// JSON, or its string form when it is not JSON.
func compactJSON(e types.ReportEntry) string {
	raw := e.Value.AsJSON
	if raw == "" {
		if v := e.Value.GetRawValue(); v != nil {
			if b, err := json.Marshal(v); err == nil {
				raw = string(b)
			}
		}
	}
	var buf bytes.Buffer
	if raw != "" && json.Compact(&buf, []byte(raw)) == nil {
		return stripANSI(buf.String())
	}
	return stripANSI(firstLines(e.Value.String(), 1))
}

// seriesKey is "name{a,b}" with the label names sorted, or "name".
func seriesKey(metric string, labels []string) string {
	if len(labels) == 0 {
		return metric
	}
	labels = append([]string(nil), labels...)
	sort.Strings(labels)
	return metric + "{" + strings.Join(labels, ",") + "}"
}

// stripANSI removes terminal escapes: routers colour their logs and Gomega
// colours failure messages, and neither belongs in a report.
func stripANSI(s string) string { return ansi.Strip(s) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
