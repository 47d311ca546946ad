package eppdiff

import (
	"fmt"
	"strings"
)

// Difference is a claim × pair whose result differs between the emulated
// EPP and llm-d's, with why: the evidence seen and the source that
// explains it. A row goes in only with both; everything else is a defect
// of the emulation to fix.
type Difference struct {
	Claim, Pair string
	// Why says what llm-d's EPP does and the emulation does not.
	Why string
	// Evidence is what a run showed (log line, counts), with the date.
	Evidence string
	// Source cites the upstream code, repo@commit:path.
	Source string
}

// Known are the known differences. None so far: in every run of the
// differential each llm-d claim × pair had the same result on both EPPs
// (docs/upstream-llmd.md#the-differential).
var Known []Difference

// KnownMarkdown renders Known for docs/upstream-llmd.md.
func KnownMarkdown() string {
	if len(Known) == 0 {
		return "No known differences: every llm-d claim × pair has had the same result on both EPPs.\n"
	}
	var b strings.Builder
	b.WriteString("| claim | pair | what llm-d's EPP does | evidence | source |\n|---|---|---|---|---|\n")
	for _, d := range Known {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", d.Claim, d.Pair, cell(d.Why), cell(d.Evidence), cell(d.Source))
	}
	return b.String()
}
