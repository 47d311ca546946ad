package suiterun

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/report"
)

func TestCheckLabelFilterReportsASyntaxErrorAsSuch(t *testing.T) {
	for _, ok := range []string{"", "router:vllm-router", "feature:roundrobin && engine:SGLang", "claim:documented || claim:extended", "!needs:gpu"} {
		if err := CheckLabelFilter(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"feature:(roundrobin":   `is not a valid label filter: Missing set operation at feature»:«(roundrobin`,
		"router:vllm-router &&": "is not a valid label filter: Unexpected EOF",
		"a && || b":             "Operator '||' missing left hand operand at a && »|«| b",
	} {
		err := CheckLabelFilter(bad)
		if err == nil || !strings.Contains(err.Error(), want) || strings.ContainsAny(err.Error(), "\n{}") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestGinkgoRunsOnlyTheSuiteOfThePrecompiledBinary(t *testing.T) {
	args := strings.Join(ginkgoArgs(Options{Nodes: 2, Timeout: "2h", LabelFilter: "a || b", Artifacts: "/a", Config: "/c/e2e.yaml",
		Args: []string{"--flake-attempts=2"}}, Suite{Binary: "/r/bin/routing.test"}), " ")
	for _, want := range []string{"--procs=2", "--timeout=2h", "--label-filter=a || b", "--flake-attempts=2",
		"/r/bin/routing.test -- -test.run=^TestRouting$ -e2e.config=/c/e2e.yaml -e2e.artifacts=/a"} {
		if !strings.Contains(args, want) {
			t.Errorf("ginkgo args %q lack %q", args, want)
		}
	}
}

// fakeGinkgo writes a script standing in for the Ginkgo CLI: it starts a
// child that ignores SIGINT (as a wedged process would), records the
// child's pid, and waits.
func fakeGinkgo(t *testing.T, dir string) (Suite, string) {
	t.Helper()
	pidFile := filepath.Join(dir, "child.pid")
	script := filepath.Join(dir, "ginkgo")
	body := "#!/usr/bin/env bash\ntrap '' INT\nsleep 300 &\necho $! > " + pidFile + "\necho started\nwait\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return Suite{Ginkgo: script, Binary: filepath.Join(dir, "routing.test")}, pidFile
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestRunKillsWhatOutlivesTheGraceAfterAnInterrupt: a run whose processes
// ignore the interrupt ends at the grace period, and none of its processes
// is left.
func TestRunKillsWhatOutlivesTheGraceAfterAnInterrupt(t *testing.T) {
	dir := t.TempDir()
	s, pidFile := fakeGinkgo(t, dir)
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(pidFile); err == nil {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	res, err := s.Run(ctx, Options{Root: dir, Artifacts: filepath.Join(dir, "artifacts"), Out: &out, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || !res.Killed || res.Report != "" || time.Since(start) > 10*time.Second {
		t.Errorf("result %+v after %s\n%s", res, time.Since(start), out.String())
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the run left process %d behind", pid)
	}
	if !strings.Contains(out.String(), "started") {
		t.Errorf("Ginkgo's output did not come through:\n%s", out.String())
	}
}

func TestRunRemovesAStaleReportAndReportsOnlyAFreshOne(t *testing.T) {
	dir := t.TempDir()
	art := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(art, report.FileJSON)
	os.WriteFile(stale, []byte("{}"), 0o644)
	script := filepath.Join(dir, "ginkgo")
	os.WriteFile(script, []byte("#!/usr/bin/env bash\necho \"fifo=${E2E_PROGRESS_FIFO:+set} target=$E2E_TARGET\"\nexit 3\n"), 0o755)
	var out bytes.Buffer
	res, err := Suite{Ginkgo: script}.Run(context.Background(), Options{Root: dir, Artifacts: art, Target: "sim", Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Report != "" || res.Killed {
		t.Errorf("result %+v", res)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("a stale report.json survived the run")
	}
	if !strings.Contains(out.String(), "fifo=set target=sim") {
		t.Errorf("the suite did not get the progress FIFO and target:\n%s", out.String())
	}
}

func TestSummaryListsFailedClaimsWithTheirCauseAndWhereTheReportIs(t *testing.T) {
	dir := t.TempDir()
	r := &report.Report{SchemaVersion: report.SchemaVersion, Headline: "Routing conformance on the simulator: 1 passed, 1 failed, 2 skipped — not a GPU qualification",
		SuiteFailures: []string{"AfterSuite failed: cleanup\nmore"},
		Statistics:    report.Statistics{Skipped: 2},
		Claims: []report.ClaimTable{{Name: "affinity", Rows: []report.ClaimRow{
			{Pair: "sglang-gateway+SGLang", Result: report.ResultFail, Reasons: []string{"Expected split 70/50 to be all on one replica"}},
			{Pair: "vllm-router+vLLM", Result: report.ResultPass}}}},
		Specs: []report.SpecResult{{Name: "x", Result: report.ResultSkip, Reason: "target sim cannot run llm-d"}, {Name: "y", Result: report.ResultSkip, Reason: "target sim cannot run llm-d"}}}
	if _, err := report.Render(dir, r); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	Summarize(&out, Result{Report: filepath.Join(dir, report.FileJSON)})
	for _, want := range []string{r.Headline, "  ! AfterSuite failed: cleanup\n", "Failed (1):\n  ✗ affinity / sglang-gateway+SGLang: Expected split 70/50 to be all on one replica",
		"Skipped (2):\n  ○ 2 × target sim cannot run llm-d", "report: " + filepath.Join(dir, report.FileHTML)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	// A run that did not start: its cause is the headline, said once.
	r.Headline = "Routing conformance on the simulator did not run: suite setup failed: config error: e2e.yaml: bogusField is not a known field"
	r.SuiteFailures = []string{"suite setup failed: config error: e2e.yaml: bogusField is not a known field"}
	if _, err := report.Render(dir, r); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	Summarize(&out, Result{Report: filepath.Join(dir, report.FileJSON)})
	if n := strings.Count(out.String(), "bogusField"); n != 1 {
		t.Errorf("the cause is said %d times:\n%s", n, out.String())
	}
	out.Reset()
	Summarize(&out, Result{})
	if !strings.Contains(out.String(), "no report was written") || strings.Contains(out.String(), "report: ") {
		t.Errorf("a run without a report points at one:\n%s", out.String())
	}
}

func TestHeartbeatSaysTheStepIsStillGoing(t *testing.T) {
	var out bytes.Buffer
	stop := heartbeat(Options{Out: &out, TTY: true}, time.Now(), "compiling the suite")
	time.Sleep(1200 * time.Millisecond)
	stop()
	stop() // twice is fine
	if s := out.String(); !strings.Contains(s, "\r\x1b[Ke2e: compiling the suite… 1s") || !strings.HasSuffix(s, "\r\x1b[K") {
		t.Errorf("terminal heartbeat %q", s)
	}
}
