// Package suiterun runs the routing suite the way make e2e, make qualify
// and make repeat do: it checks the label filter before anything starts,
// compiles the suite and the Ginkgo CLI with a visible step, runs Ginkgo on
// the precompiled suite with a live traffic line under its output, forwards
// Ctrl-C and makes sure no process of the run outlives it, and reads the
// report back for an end-of-run summary.
package suiterun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/internal/progress"
	"github.com/gpustack/routing-conformance/report"
)

// Options are the knobs of make e2e.
type Options struct {
	// Go is the go command (default "go"); Root is the repository root.
	Go   string
	Root string
	// Target, Config and Artifacts are E2E_TARGET, E2E_CONFIG (a path) and
	// ARTIFACTS.
	Target    string
	Config    string
	Artifacts string
	// Nodes is GINKGO_NODES; LabelFilter, Focus, Skip, Timeout and Args
	// the other GINKGO_* knobs.
	Nodes       int
	LabelFilter string
	Focus       string
	Skip        string
	Timeout     string
	Args        []string
	// Out receives everything the run prints; TTY says whether it is a
	// terminal (live lines redrawn in place) or a log (plain lines).
	Out io.Writer
	TTY bool
	// Width is the terminal's width (nil: 120 columns).
	Width func() int
	// Grace is how long Ginkgo has after the first interrupt before every
	// process of the run is killed (default 25s: the run ends within 30s).
	Grace time.Duration
	// Env is added to the suite's environment (KEY=value), after the
	// caller's own, so it wins.
	Env []string
}

// The routing suite as a Go test binary: its package, the binary's name,
// and the test function that runs its Ginkgo specs (the package's plain
// tests, the registry checks, read files relative to the package and are
// make unit's).
const (
	SuitePackage = "./suites/routing"
	SuiteBinary  = "routing.test"
	SuiteRunFlag = "-test.run=^TestRouting$"
	// GinkgoJSON is Ginkgo's own JSON report, written beside report.json.
	GinkgoJSON = "ginkgo-report.json"
)

// GinkgoOutputFiles are what a run writes under Artifacts, removed first so
// that a stale report is never taken for this run's.
var GinkgoOutputFiles = []string{report.FileJSON, report.FileMarkdown, report.FileHTML, report.FileJUnit, report.FileConfig, GinkgoJSON}

// CheckLabelFilter parses a label filter the way Ginkgo will, so that a
// typo is reported as such before any process starts.
func CheckLabelFilter(filter string) error {
	if filter == "" {
		return nil
	}
	if _, err := types.ParseLabelFilter(filter); err != nil {
		return fmt.Errorf("GINKGO_LABEL_FILTER %q is not a valid label filter: %s (labels are key:value, joined with &&, || and !, grouped with parentheses)",
			filter, oneLine(err))
	}
	return nil
}

// highlight is how Ginkgo marks the offending character of a filter.
var highlight = regexp.MustCompile(`\{\{red\}\}\{\{bold\}\}\{\{underline\}\}(.*?)\{\{/\}\}`)

// oneLine is Ginkgo's parse error on one line: what is wrong, then the
// filter with the offending character between » and «.
func oneLine(err error) string {
	var ge types.GinkgoError
	if !errors.As(err, &ge) {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	var lines []string
	for _, l := range strings.Split(ge.Message, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return strings.TrimSpace(ge.Heading)
	}
	what := strings.TrimSuffix(lines[len(lines)-1], ".")
	if len(lines) > 1 && highlight.MatchString(lines[0]) {
		what += " at " + highlight.ReplaceAllString(lines[0], "»$1«")
	}
	return what
}

// Suite is the compiled suite and Ginkgo CLI.
type Suite struct {
	Ginkgo string
	Binary string
}

// Compile builds the Ginkgo CLI (the version go.mod pins) and the suite
// into Root/bin, saying so first and, while it lasts, every few seconds:
// the first build of the sim takes minutes.
func Compile(ctx context.Context, o Options) (Suite, error) {
	bin := filepath.Join(o.Root, "bin")
	s := Suite{Ginkgo: filepath.Join(bin, "ginkgo"), Binary: filepath.Join(bin, SuiteBinary)}
	fmt.Fprintln(o.Out, "e2e: compiling the suite; the first run takes a few minutes")
	start := time.Now()
	stop := heartbeat(o, start, "compiling the suite")
	defer stop()
	err := goRun(ctx, goCommand(o), o.Root, "build", "-o", s.Ginkgo, "github.com/onsi/ginkgo/v2/ginkgo")
	if err == nil {
		err = BuildSuite(ctx, goCommand(o), o.Root, s.Binary)
	}
	stop()
	if err != nil {
		return s, err
	}
	fmt.Fprintf(o.Out, "e2e: compiled in %s\n", time.Since(start).Round(time.Second))
	return s, nil
}

// BuildSuite compiles the suite's test binary into out with the go command
// goCmd, in the repository root.
func BuildSuite(ctx context.Context, goCmd, root, out string) error {
	return goRun(ctx, goCmd, root, "test", "-c", "-o", out, SuitePackage)
}

// goRun runs goCmd with args in dir; its error carries the output.
func goRun(ctx context.Context, goCmd, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func goCommand(o Options) string {
	if o.Go == "" {
		return "go"
	}
	return o.Go
}

// heartbeat says what is still going on: on a terminal a line redrawn every
// second, in a log a line every 15 seconds. stop erases the terminal line.
func heartbeat(o Options, start time.Time, what string) (stop func()) {
	every := 15 * time.Second
	if o.TTY {
		every = time.Second
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				if o.TTY {
					io.WriteString(o.Out, "\r\x1b[K")
				}
				return
			case <-t.C:
				el := time.Since(start).Round(time.Second)
				if o.TTY {
					fmt.Fprintf(o.Out, "\r\x1b[Ke2e: %s… %s", what, el)
				} else {
					fmt.Fprintf(o.Out, "e2e: still %s (%s)\n", what, el)
				}
			}
		}
	}()
	done := false
	return func() {
		if !done {
			done = true
			close(quit)
			<-exited
		}
	}
}

// Result is how a run ended.
type Result struct {
	// ExitCode is Ginkgo's (non-zero when a spec or the suite failed).
	ExitCode int
	// Interrupted is set when the run got SIGINT or SIGTERM.
	Interrupted bool
	// Killed is set when processes were still alive after Ginkgo ended, or
	// after the grace period, and were killed.
	Killed bool
	// Report is report.json when the run wrote one, else "".
	Report string
	// Elapsed is the run's wall time.
	Elapsed time.Duration
}

// ginkgoArgs are the arguments of the Ginkgo CLI for s.
func ginkgoArgs(o Options, s Suite) []string {
	args := []string{"-v", fmt.Sprintf("--procs=%d", max(o.Nodes, 1)), "--timeout=" + o.Timeout,
		"--fail-on-pending", "--fail-on-empty", "--keep-going",
		"--poll-progress-after=5m", "--poll-progress-interval=1m",
		"--output-dir=" + o.Artifacts, "--json-report=" + GinkgoJSON}
	if o.LabelFilter != "" {
		args = append(args, "--label-filter="+o.LabelFilter)
	}
	if o.Focus != "" {
		args = append(args, "--focus="+o.Focus)
	}
	if o.Skip != "" {
		args = append(args, "--skip="+o.Skip)
	}
	args = append(args, o.Args...)
	// Only the Ginkgo suite: the package's plain tests (the registry
	// checks, run by make unit) read files relative to the package.
	return append(args, s.Binary, "--", SuiteRunFlag, "-e2e.config="+o.Config, "-e2e.artifacts="+o.Artifacts)
}

// Run runs Ginkgo on the compiled suite. Ginkgo and its processes get a
// process group of their own: an interrupt reaches them once, forwarded by
// Run, and whatever of the group is alive when Ginkgo ends, or Grace after
// the first interrupt, is killed.
func (s Suite) Run(ctx context.Context, o Options) (Result, error) {
	if o.Timeout == "" {
		o.Timeout = "2h"
	}
	if o.Grace <= 0 {
		o.Grace = 25 * time.Second
	}
	if err := os.MkdirAll(o.Artifacts, 0o755); err != nil {
		return Result{}, err
	}
	for _, f := range GinkgoOutputFiles {
		if err := os.Remove(filepath.Join(o.Artifacts, f)); err != nil && !os.IsNotExist(err) {
			return Result{}, err
		}
	}
	tmp, err := os.MkdirTemp("", "e2e-progress-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)

	display := progress.NewDisplay(o.Out, o.TTY, 10*time.Second, o.Width)
	defer display.Close()
	fifo := filepath.Join(tmp, "progress")
	stopProgress, err := progress.Serve(fifo, display.Event)
	if err != nil {
		return Result{}, err
	}
	defer stopProgress()

	cmd := exec.Command(s.Ginkgo, ginkgoArgs(o, s)...)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), config.EnvTarget+"="+o.Target, config.EnvArtifacts+"="+o.Artifacts, config.EnvProgressFIFO+"="+fifo)
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Stdout, cmd.Stderr = display, display
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process of the group that outlives Ginkgo keeps its output pipe
	// open; stop waiting for it after a while (and kill it below).
	cmd.WaitDelay = 5 * time.Second

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("starting %s: %w", s.Ginkgo, err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var res Result
	var grace <-chan time.Time
	var waitErr error
	cancelled := ctx.Done()
wait:
	for {
		select {
		case waitErr = <-exited:
			break wait
		case sig := <-sigs:
			// Ginkgo's processes handle it: the first cleans up and
			// reports, a second reports only, a third bails out.
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
			if !res.Interrupted {
				res.Interrupted = true
				grace = time.After(o.Grace)
				display.Close()
				display.Printf("\ne2e: interrupted: the suite is cleaning up and writing a partial report (at most %s; interrupt again to hurry it)\n", o.Grace)
			}
		case <-grace:
			display.Printf("e2e: the suite did not end within %s of the interrupt; killing its processes\n", o.Grace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			res.Killed = true
			grace = nil
		case <-cancelled:
			cancelled = nil
			_ = syscall.Kill(-pgid, syscall.SIGINT)
			if !res.Interrupted {
				res.Interrupted = true
				grace = time.After(o.Grace)
			}
		}
	}
	// Nothing of the run may outlive it: a process left in the group (an
	// orphaned Ginkgo process) is killed, and said so.
	// Ginkgo has exited, but its output may still be in the pipe: wait for
	// the copy to end before writing anything of our own.
	stopProgress()
	display.Close()
	if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
		res.Killed = true
		fmt.Fprintln(o.Out, "e2e: killed processes of the run that outlived Ginkgo")
	}
	res.Elapsed = time.Since(start)
	res.ExitCode = cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return res, waitErr
	}
	if fi, err := os.Stat(filepath.Join(o.Artifacts, report.FileJSON)); err == nil && !fi.ModTime().Before(start) {
		res.Report = filepath.Join(o.Artifacts, report.FileJSON)
	}
	return res, nil
}
