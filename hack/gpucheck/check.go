package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/report"
)

// capacityHints are substrings of the skip reasons a target gives when it
// has no free accelerators (suites/framework PairDeployment.Ready, clusters/kube
// CapacityError). They only choose the wording of the verdict: whether the
// run passes depends on results alone.
var capacityHints = []string{"has no room for", "free accelerators", "no Active accelerated InstanceType", "no InstanceType exists"}

// Reasons that start with these are not a shortfall of the run: the label
// filter, focus or skip left the spec out (report.specResult), or the
// documentation says the claim does not apply to the pair (suites/framework
// Spec.SkipIfNotApplicable).
var notCounted = []string{"not selected in this run", "not applicable"}

// Verdict is the check's answer: OK, a one-line summary, and warnings for a
// run that passes with some GPU specs skipped.
type Verdict struct {
	OK       bool
	Summary  string
	Warnings []string
}

// Check decides whether the run rep reports exercised GPUs.
func Check(rep *report.Report) (Verdict, error) {
	if len(rep.Specs) == 0 {
		return Verdict{}, fmt.Errorf("%s lists no specs; the suite stopped before any spec: %s", report.FileJSON, rep.Headline)
	}
	target := rep.Environment.Target
	if target == "" || target == config.TargetSim {
		return Verdict{Summary: fmt.Sprintf("%s is from target %q, not a GPU cluster: a sim run qualifies no GPU (run with %s=%s)", report.FileJSON, target, config.EnvTarget, config.TargetKube)}, nil
	}

	var ran, capacity, filtered int
	var skipped []string
	for _, s := range rep.Specs {
		if !slices.Contains(s.Labels, fixtures.LabelNeedsGPU) {
			continue
		}
		switch {
		case s.Result == report.ResultPass || s.Result == report.ResultFail:
			ran++
		case s.Result == report.ResultNotApplicable || hasAnyPrefix(s.Reason, notCounted):
			filtered++
		default:
			if isCapacity(s.Reason) {
				capacity++
			}
			skipped = append(skipped, fmt.Sprintf("%s: %s", s.Name, firstLine(s.Reason)))
		}
	}
	total := ran + filtered + len(skipped)

	switch {
	case total == 0:
		return Verdict{Summary: "the report has no spec labelled " + fixtures.LabelNeedsGPU + "; nothing in this run needed a GPU"}, nil
	case ran > 0:
		v := Verdict{OK: true, Summary: fmt.Sprintf("%d of %d routing specs that need a GPU ran on target %s (%d skipped, %d not selected or not applicable)", ran, total, target, len(skipped), filtered)}
		if capacity > 0 {
			v.Warnings = append(v.Warnings, fmt.Sprintf("%d routing specs were skipped for lack of GPU capacity, e.g. %s", capacity, skipped[0]))
		}
		return v, nil
	case len(skipped) == 0:
		return Verdict{Summary: fmt.Sprintf("none of the %d routing specs that need a GPU was selected (label filter) or applicable; this run qualifies nothing on GPUs", total)}, nil
	case capacity == len(skipped):
		return Verdict{Summary: fmt.Sprintf("no GPU capacity: all %d selected routing specs that need a GPU were skipped because the cluster had no room, e.g. %s; free accelerators (kubectl get instancetypes) or point NIGHTLY_KUBECONFIG at a cluster with room", len(skipped), skipped[0])}, nil
	default:
		return Verdict{Summary: fmt.Sprintf("none of the %d selected routing specs that need a GPU ran (%d skipped for GPU capacity); first skip: %s", len(skipped), capacity, skipped[0])}, nil
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func isCapacity(reason string) bool {
	for _, h := range capacityHints {
		if strings.Contains(reason, h) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
