// Command e2e runs the routing suite for make e2e, make qualify and make
// repeat: it checks the label filter before anything starts, compiles the
// suite with a visible step, measures the traffic driver's own overhead on
// this machine when the run can select the concurrency claim (overhead.go),
// runs Ginkgo on it with a live traffic line, and ends with a summary of
// what failed and why.
//
//	e2e run     [flags]                          the suite once (make e2e)
//	e2e qualify -version V [-baseline B] [flags] documented and extended claims, then a bundle (make qualify)
//	e2e repeat  -n N [flags]                     the suite N times, then the flaky specs (make repeat)
//	e2e plan    [flags]                          what a run would create and cost, creating nothing (make plan)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/fixtures"
	"github.com/gpustack/routing-conformance/internal/suiterun"
	"github.com/gpustack/routing-conformance/report"
	"github.com/gpustack/routing-conformance/report/bundle"
)

// QualifyFilter selects the claims a qualification runs. Claims label
// themselves claim:documented or claim:extended; which exist is the
// registry's business.
const QualifyFilter = fixtures.LabelDocumented + " || " + fixtures.LabelExtended

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout))
}

const usage = `usage: e2e run|qualify|repeat|plan [flags]   (see make help)`

func run(ctx context.Context, args []string, out io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(out, usage)
		return 2
	}
	if args[0] == "overhead-server" {
		return overheadServer(ctx, args[1:])
	}
	fs := flag.NewFlagSet("e2e "+args[0], flag.ContinueOnError)
	fs.SetOutput(out)
	o := suiterun.Options{Out: out}
	fs.StringVar(&o.Go, "go", "go", "the go command")
	fs.StringVar(&o.Target, "target", config.TargetSim, config.EnvTarget+": sim, kube or kind")
	fs.StringVar(&o.Config, "config", config.DefaultFile, config.EnvConfig+": the suite config")
	fs.StringVar(&o.Artifacts, "artifacts", config.Default().Artifacts, config.EnvArtifacts+": where the report goes")
	fs.IntVar(&o.Nodes, "nodes", 2, "GINKGO_NODES: parallel processes")
	fs.StringVar(&o.LabelFilter, "label-filter", "", "GINKGO_LABEL_FILTER")
	fs.StringVar(&o.Focus, "focus", "", "GINKGO_FOCUS")
	fs.StringVar(&o.Skip, "skip", "", "GINKGO_SKIP")
	fs.StringVar(&o.Timeout, "timeout", "2h", "GINKGO_TIMEOUT")
	ginkgoArgs := fs.String("ginkgo-args", "", "GINKGO_ARGS: further Ginkgo flags, space-separated")
	version := fs.String("version", "", "qualify: the operator version qualified (names the bundle)")
	baseline := fs.String("baseline", "", "qualify: an earlier bundle (or report.json) to compare with")
	n := fs.Int("n", 20, "repeat: how many runs")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	o.Args = strings.Fields(*ginkgoArgs)
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(out, "e2e:", err)
		return 1
	}
	o.Root = root
	o.Config = absolute(root, o.Config)
	o.Artifacts = absolute(root, o.Artifacts)
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		o.TTY = true
		o.Width = func() int {
			w, _, err := term.GetSize(int(f.Fd()))
			if err != nil {
				return 0
			}
			return w
		}
	}
	switch args[0] {
	case "run":
		return runOnce(ctx, o)
	case "qualify":
		return qualify(ctx, o, *version, *baseline)
	case "repeat":
		return repeat(ctx, o, *n)
	case "plan":
		var free func(context.Context, *config.Config) (int64, string, error)
		if o.Target == config.TargetKube {
			free = freeAccelerators
		}
		return plan(ctx, o, free)
	}
	fmt.Fprintln(out, usage)
	return 2
}

func absolute(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// prepare checks the label filter, then compiles.
func prepare(ctx context.Context, o suiterun.Options) (suiterun.Suite, bool) {
	if err := suiterun.CheckLabelFilter(o.LabelFilter); err != nil {
		fmt.Fprintln(o.Out, "e2e:", err)
		return suiterun.Suite{}, false
	}
	s, err := suiterun.Compile(ctx, o)
	if err != nil {
		fmt.Fprintln(o.Out, "e2e: the suite does not compile:", err)
		return s, false
	}
	return s, true
}

func runOnce(ctx context.Context, o suiterun.Options) int {
	s, ok := prepare(ctx, o)
	if !ok {
		return 2
	}
	if !calibrate(ctx, o, filepath.Join(o.Artifacts, report.FileDriverOverhead)) {
		return 130
	}
	res, err := s.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(o.Out, "e2e:", err)
		return 1
	}
	suiterun.Summarize(o.Out, res)
	return exitCode(res)
}

func exitCode(res suiterun.Result) int {
	switch {
	case res.ExitCode > 0:
		return res.ExitCode
	case res.ExitCode < 0 || res.Interrupted:
		return 130 // ended by a signal
	case res.Report == "":
		return 1
	}
	return 0
}

// qualify runs the documented and extended claims into
// artifacts/qualification-<version>/ and bundles them, compared with the
// baseline when there is one. The baseline is read before the run, so an
// unreadable one costs nothing.
func qualify(ctx context.Context, o suiterun.Options, version, baselinePath string) int {
	if err := bundle.CheckVersion(version); err != nil {
		fmt.Fprintln(o.Out, "qualify:", err)
		return 2
	}
	var base *report.Report
	if baselinePath != "" {
		var err error
		if base, err = bundle.ReadReport(baselinePath); err != nil {
			fmt.Fprintln(o.Out, "qualify: refusing the baseline:", err)
			return 2
		}
	}
	if o.LabelFilter == "" {
		o.LabelFilter = QualifyFilter
	} else {
		o.LabelFilter = "(" + QualifyFilter + ") && (" + o.LabelFilter + ")"
	}
	top := o.Artifacts
	o.Artifacts = filepath.Join(top, "qualification-"+version)
	s, ok := prepare(ctx, o)
	if !ok {
		return 2
	}
	// An earlier qualification of this version must not lend the bundle
	// its evidence.
	if err := os.RemoveAll(o.Artifacts); err != nil {
		fmt.Fprintln(o.Out, "qualify:", err)
		return 1
	}
	if !calibrate(ctx, o, filepath.Join(o.Artifacts, report.FileDriverOverhead)) {
		return 130
	}
	res, err := s.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(o.Out, "qualify:", err)
		return 1
	}
	if res.Report == "" {
		suiterun.Summarize(o.Out, res)
		fmt.Fprintln(o.Out, "qualify: no bundle: the run wrote no report")
		return max(exitCode(res), 1)
	}
	r, err := report.Load(res.Report)
	if err != nil {
		fmt.Fprintln(o.Out, "qualify:", err)
		return 1
	}
	if base != nil {
		r.Baseline = report.Compare(base, r, filepath.Base(baselinePath))
	}
	r.SetLinkBase(o.Artifacts, o.Root)
	if _, err := report.Render(o.Artifacts, r); err != nil {
		fmt.Fprintln(o.Out, "qualify:", err)
		return 1
	}
	path := filepath.Join(top, bundle.Name(version))
	if _, err := bundle.Write(path, bundle.Options{Version: version, Dir: o.Artifacts, Report: r, ConfigFile: r.Environment.ConfigFile,
		DocsDir: filepath.Join(o.Root, "docs"), Env: settings(os.Environ(), o)}); err != nil {
		fmt.Fprintln(o.Out, "qualify: writing the bundle:", err)
		return 1
	}
	suiterun.Summarize(o.Out, res)
	fmt.Fprintf(o.Out, "Verdict per pair (operator %s):\n", version)
	for _, v := range r.Verdicts {
		fmt.Fprintf(o.Out, "  %s\n", v.Line)
	}
	if r.Baseline != nil {
		d := r.Baseline
		fmt.Fprintf(o.Out, "Compared with %s: %d claim cells and %d specs changed, %d splits moved more than %.0f points, %d series appeared, %d vanished\n",
			d.Baseline, len(d.Claims), len(d.Specs), len(d.Splits), 100*d.Tolerance, len(d.SeriesAppeared), len(d.SeriesVanished))
	}
	fmt.Fprintf(o.Out, "bundle: %s\n", path)
	return exitCode(res)
}

// settings are the run's settings as it saw them, for the bundle: the
// target and the GINKGO_* knobs as the runner got them, then every variable
// of config's table set in env, except those the runner sets for the suite
// (the target, ARTIFACTS, which the bundle holds, and the internal ones).
func settings(env []string, o suiterun.Options) []string {
	out := []string{config.EnvTarget + "=" + o.Target, "GINKGO_LABEL_FILTER=" + o.LabelFilter, fmt.Sprintf("GINKGO_NODES=%d", o.Nodes),
		"GINKGO_FOCUS=" + o.Focus, "GINKGO_SKIP=" + o.Skip, "GINKGO_TIMEOUT=" + o.Timeout}
	recorded := map[string]bool{}
	for _, ov := range config.Overrides() {
		recorded[ov.Env] = !ov.Internal() && ov.Env != config.EnvTarget && ov.Env != config.EnvArtifacts
	}
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); recorded[name] {
			out = append(out, kv)
		}
	}
	return out
}

// repeat runs the compiled suite n times, each into artifacts/repeat/run-<i>
// with its output in ginkgo.log there, and names the specs whose result
// changed between runs.
func repeat(ctx context.Context, o suiterun.Options, n int) int {
	if n < 1 {
		fmt.Fprintln(o.Out, "repeat: N must be at least 1")
		return 2
	}
	s, ok := prepare(ctx, o)
	if !ok {
		return 2
	}
	out, top := o.Out, filepath.Join(o.Artifacts, "repeat")
	if err := os.RemoveAll(top); err != nil {
		fmt.Fprintln(out, "repeat:", err)
		return 1
	}
	if !calibrate(ctx, o, filepath.Join(top, report.FileDriverOverhead)) {
		return 130
	}
	var reports []*report.Report
	for i := 1; i <= n; i++ {
		dir := filepath.Join(top, fmt.Sprintf("run-%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(out, "repeat:", err)
			return 1
		}
		log, err := os.Create(filepath.Join(dir, "ginkgo.log"))
		if err != nil {
			fmt.Fprintln(out, "repeat:", err)
			return 1
		}
		ro := o
		ro.Artifacts, ro.Out, ro.TTY = dir, log, false
		start := time.Now()
		res, err := s.Run(ctx, ro)
		log.Close()
		if err != nil {
			fmt.Fprintln(out, "repeat:", err)
			return 1
		}
		var r *report.Report
		line := "no report (see " + log.Name() + ")"
		if res.Report != "" {
			if r, err = report.Load(res.Report); err == nil {
				line = r.Headline
			} else {
				line = err.Error()
			}
		}
		reports = append(reports, r)
		fmt.Fprintf(out, "run %d/%d (%s): %s\n", i, n, time.Since(start).Round(100*time.Millisecond), line)
		if res.Interrupted {
			fmt.Fprintln(out, "repeat: interrupted")
			break
		}
	}
	rep := suiterun.Compare(reports)
	fmt.Fprintln(out, rep.Line())
	for _, f := range rep.Flaky {
		fmt.Fprintf(out, "  flaky: %s\n", f)
	}
	for _, f := range rep.AlwaysFailed {
		fmt.Fprintf(out, "  failed in every run: %s\n", f)
	}
	fmt.Fprintf(out, "reports: %s/run-*/\n", top)
	if !rep.Stable() || errors.Is(ctx.Err(), context.Canceled) {
		return 1
	}
	return 0
}
