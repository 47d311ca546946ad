package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim/upstream"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/suiterun"
	"github.com/gpustack/routing-conformance/internal/upstreamverdict"
)

// upstreamRouters runs the compiled suite twice on the sim, with the
// emulated routers and then with the routers' upstream code, into
// artifacts/upstream-routers/{emulated,upstream}, and compares the two
// reports row by row (internal/upstreamverdict). It fails on any row that
// differs otherwise than the known-differences table says, and keeps both
// reports either way.
func upstreamRouters(ctx context.Context, o suiterun.Options) int {
	out := o.Out
	in, err := upstream.Load("")
	if err != nil {
		fmt.Fprintln(out, "test-upstream-routers:", err)
		return 1
	}
	var wheels []string
	for _, r := range upstream.Routers() {
		w, _ := in.Wheel(r)
		wheels = append(wheels, fmt.Sprintf("%s %s (%s, sha256 %s, hash-checked %t)", w.Package, w.Version, w.File, w.SHA256, w.HashChecked))
	}
	if o.Target != config.TargetSim {
		fmt.Fprintf(out, "test-upstream-routers: runs on the sim target only, not %s\n", o.Target)
		return 2
	}
	s, ok := prepare(ctx, o)
	if !ok {
		return 2
	}
	top := filepath.Join(o.Artifacts, "upstream-routers")
	if err := os.RemoveAll(top); err != nil {
		fmt.Fprintln(out, "test-upstream-routers:", err)
		return 1
	}
	reports := map[string]*upstreamverdict.Report{}
	for _, routers := range config.SimRouters {
		ro := o
		ro.Artifacts = filepath.Join(top, routers)
		// Known rows are checked against the failed specs' logs.
		ro.Env = append(append([]string{}, o.Env...), "E2E_SIM_ROUTERS="+routers, "E2E_COLLECT_ARTIFACTS="+config.CollectOnFailure)
		if err := os.MkdirAll(ro.Artifacts, 0o755); err != nil {
			fmt.Fprintln(out, "test-upstream-routers:", err)
			return 1
		}
		log, err := os.Create(filepath.Join(ro.Artifacts, "ginkgo.log"))
		if err != nil {
			fmt.Fprintln(out, "test-upstream-routers:", err)
			return 1
		}
		ro.Out, ro.TTY = log, false
		fmt.Fprintf(out, "test-upstream-routers: the suite with %s routers (output: %s)\n", routers, log.Name())
		start := time.Now()
		res, err := s.Run(ctx, ro)
		log.Close()
		if err != nil {
			fmt.Fprintln(out, "test-upstream-routers:", err)
			return 1
		}
		if res.Interrupted {
			fmt.Fprintln(out, "test-upstream-routers: interrupted")
			return 130
		}
		if res.Report == "" {
			fmt.Fprintf(out, "test-upstream-routers: the %s run wrote no report (see %s)\n", routers, log.Name())
			return 1
		}
		r, err := upstreamverdict.ReadReport(res.Report)
		if err != nil {
			fmt.Fprintln(out, "test-upstream-routers:", err)
			return 1
		}
		reports[routers] = r
		fmt.Fprintf(out, "  %s routers, %s: %s\n", routers, time.Since(start).Round(time.Second), headline(res.Report))
	}
	v := upstreamverdict.Compare(reports[config.SimRoutersEmulated], reports[config.SimRoutersUpstream], upstreamverdict.Known)
	if err := writeVerdict(top, v, wheels); err != nil {
		fmt.Fprintln(out, "test-upstream-routers:", err)
		return 1
	}
	fmt.Fprintf(out, "upstream routers: %s\n", strings.Join(wheels, "; "))
	fmt.Fprintln(out, v.Line())
	for _, m := range v.Mismatches {
		fmt.Fprintf(out, "  ✗ %s\n", m)
	}
	for _, r := range v.Rows {
		if r.Problem == "" && r.Known == nil && r.Emulated == upstreamverdict.Fail {
			fmt.Fprintf(out, "  ! %s / %s fails in both runs (they agree; make test names the cause)\n", r.Claim, r.Pair)
		}
	}
	fmt.Fprintf(out, "comparison: %s (reports: %s, %s)\n", filepath.Join(top, "comparison.md"),
		filepath.Join(top, config.SimRoutersEmulated, "report.json"), filepath.Join(top, config.SimRoutersUpstream, "report.json"))
	if !v.OK() {
		return 1
	}
	return 0
}

// headline is report.json's headline, for a one-line account of a run.
func headline(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var r struct {
		Headline string `json:"headline"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err.Error()
	}
	return r.Headline
}

// writeVerdict writes comparison.md and comparison.json into dir.
func writeVerdict(dir string, v upstreamverdict.Verdict, wheels []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Upstream routers against the emulations\n\n%s.\n\nUpstream: %s.\n\n", v.Line(), strings.Join(wheels, "; "))
	b.WriteString("| claim | pair | emulated | upstream | verdict |\n|---|---|---|---|---|\n")
	type jsonRow struct {
		Claim, Pair, Emulated, Upstream, Verdict string
		Kind                                     string `json:",omitempty"`
	}
	var rows []jsonRow
	for _, r := range v.Rows {
		verdict, kind := "agree", ""
		switch {
		case r.Problem != "":
			verdict = "MISMATCH: " + r.Problem
		case r.Known != nil:
			verdict, kind = "known difference ("+r.Known.Kind+"): "+r.Known.Why, r.Known.Kind
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Claim, r.Pair, r.Emulated, r.Upstream,
			strings.ReplaceAll(strings.ReplaceAll(verdict, "|", `\|`), "\n", " "))
		rows = append(rows, jsonRow{r.Claim, r.Pair, r.Emulated, r.Upstream, verdict, kind})
	}
	if err := os.WriteFile(filepath.Join(dir, "comparison.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(struct {
		Summary  string
		Upstream []string
		Rows     []jsonRow
	}{v.Line(), wheels, rows}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "comparison.json"), j, 0o644)
}
