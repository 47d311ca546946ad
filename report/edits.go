package report

// The framework's edits of spec.router.extraArgs: the evidence of each
// edit, the guard that trips when one replaced an engine Pod, and their
// summary in the environment block.

import (
	"fmt"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// Entry names of the edits' evidence.
const (
	// EntryRouterEdit is recorded once per edit of a shared deployment's
	// router args by the framework.
	EntryRouterEdit = "router-edit" // RouterEdit
	// EntryEditGuard is recorded when an edit replaced an engine Pod.
	EntryEditGuard = "edit-guard" // EditGuard
)

// RouterEdit is one edit of a shared deployment's spec.router.extraArgs:
// the router Pods before and after and whether the engine Pods stayed.
type RouterEdit struct {
	Claim      string   `json:"claim"`
	Pair       string   `json:"pair"`
	Deployment string   `json:"deployment"`
	From       []string `json:"from"`
	To         []string `json:"to"`
	OldRouters []string `json:"oldRouterPods"`
	NewRouters []string `json:"newRouterPods"`
	// Refused: To is a value the router refuses, edited in and back (the
	// router Pods are then those that kept serving).
	Refused bool `json:"refused,omitempty"`
	// EnginesKept: every engine Pod has the UID it had before the edit.
	EnginesKept bool `json:"enginesKept"`
	// Replaced names the engine Pods that changed.
	Replaced []string `json:"replaced,omitempty"`
	// Seconds is from the edit to the deployment Ready with the new router
	// Pod (to the old one Ready again, for a refused value).
	Seconds float64 `json:"seconds"`
}

// EntryName implements Entry.
func (RouterEdit) EntryName() string { return EntryRouterEdit }

// String is what Ginkgo's log prints for the entry: its description.
func (x RouterEdit) String() string { return x.Describe() }

// Describe implements Describer.
func (x RouterEdit) Describe() string {
	engines := "engine Pods kept"
	if !x.EnginesKept {
		engines = "engine Pods REPLACED: " + strings.Join(x.Replaced, ", ")
	}
	how := fmt.Sprintf("router Pod %s -> %s", strings.Join(x.OldRouters, ","), strings.Join(x.NewRouters, ","))
	if x.Refused {
		how = "refused, edited back; router Pod " + strings.Join(x.NewRouters, ",") + " kept serving"
	}
	return fmt.Sprintf("edit of %s's router args %q -> %q: %s in %.2fs, %s", x.Deployment, x.From, x.To, how, x.Seconds, engines)
}

// EditGuard is the guard's record of the first edit that replaced an
// engine Pod: from then on the run creates a deployment per
// router-argument set.
type EditGuard struct {
	Pair       string `json:"pair"`
	Deployment string `json:"deployment"`
	Spec       string `json:"spec"`
	// Line says it all in one line.
	Line string `json:"line"`
}

// EntryName implements Entry.
func (EditGuard) EntryName() string { return EntryEditGuard }

// Describe implements Describer.
func (x EditGuard) Describe() string { return x.Line }

// String is what Ginkgo's log prints for the entry: its one line.
func (x EditGuard) String() string { return x.Line }

// EditSummary is what the run's edits of router args came to.
type EditSummary struct {
	// Edits counts the framework's edits of spec.router.extraArgs, a
	// refused value two (in and back), as the plan counts them.
	Edits int `json:"edits"`
	// EnginesReplaced counts those after which an engine Pod had a new UID.
	EnginesReplaced int `json:"enginesReplaced"`
	// Fallback is the guard's line when it tripped: the run fell back to a
	// deployment per router-argument set from then on.
	Fallback string `json:"fallback,omitempty"`
}

// editSummary adds up the run's edit entries, whichever process recorded
// them.
func editSummary(r types.Report) EditSummary {
	var out EditSummary
	for _, sr := range r.SpecReports {
		for _, e := range sr.ReportEntries {
			switch e.Name {
			case EntryRouterEdit:
				var x RouterEdit
				if decodeEntry(e, &x) != nil {
					continue
				}
				out.Edits++
				if x.Refused {
					out.Edits++
				}
				if !x.EnginesKept {
					out.EnginesReplaced++
				}
			case EntryEditGuard:
				var g EditGuard
				if decodeEntry(e, &g) == nil && out.Fallback == "" {
					out.Fallback = g.Line
				}
			}
		}
	}
	return out
}

// editRows are the environment rows of the run's edits.
func editRows(s EditSummary) []EnvRow {
	if s.Edits == 0 && s.Fallback == "" {
		return nil
	}
	rows := []EnvRow{{"Router-argument edits", fmt.Sprintf("%d (spec.router.extraArgs edited on a shared deployment; engine Pods replaced by %d)", s.Edits, s.EnginesReplaced)}}
	if s.Fallback != "" {
		rows = append(rows, EnvRow{"Edit guard", s.Fallback})
	}
	return rows
}
