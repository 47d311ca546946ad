package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpustack/routing-conformance/clusters/sim"
	"github.com/gpustack/routing-conformance/config"
	"github.com/gpustack/routing-conformance/report"
)

// proc is a process as /proc/<pid>/stat gives it.
type proc struct {
	pid, ppid int
	start     string // start time in clock ticks: tells a reused pid apart
	cmdline   string // its argv, space-separated
}

func readProcs(t *testing.T) map[int]proc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc: " + err.Error())
	}
	out := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ... starttime is field 22.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = proc{pid: pid, ppid: ppid, start: f[19], cmdline: strings.ReplaceAll(string(cmdline), "\x00", " ")}
	}
	return out
}

// descendants are root and every process under it.
func descendants(all map[int]proc, root int) []proc {
	children := map[int][]int{}
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if p, ok := all[pid]; ok {
			out = append(out, p)
		}
		queue = append(queue, children[pid]...)
	}
	return out
}

// listening are the TCP sockets in LISTEN state, by inode, with their local
// address.
func listening(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 9 && fields[3] == "0A" {
				out[fields[9]] = fields[1]
			}
		}
	}
	return out
}

var socketInode = regexp.MustCompile(`^socket:\[(\d+)\]$`)

// socketsOf are the socket inodes the processes hold open.
func socketsOf(ps []proc) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		dir := fmt.Sprintf("/proc/%d/fd", p.pid)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			target, err := os.Readlink(filepath.Join(dir, e.Name()))
			if m := socketInode.FindStringSubmatch(target); err == nil && m != nil {
				out[m[1]] = p.pid
			}
		}
	}
	return out
}

var trafficLine = regexp.MustCompile(`traffic \[process \d+\] \S+ \S+: (\d+)/(\d+) requests`)

// TestInterruptMidTrafficEndsWithAPartialReportAndLeavesNothing does what a
// person at a terminal does: make e2e on the sim, Ctrl-C (SIGINT to the
// foreground process group) while traffic runs. The run must end within 30
// seconds with a report marked interrupted, and no process of the run and
// no port it listened on may be left: with llm-d-router's emulation, and
// with the routers built from source, whose processes must all be gone too.
func TestInterruptMidTrafficEndsWithAPartialReportAndLeavesNothing(t *testing.T) {
	if os.Getenv(config.EnvReliability) == "" {
		t.Skip("runs make e2e on the sim; make reliability (part of make test) runs it with " + config.EnvReliability + "=1")
	}
	const claims = "feature:affinity || feature:roundrobin"
	t.Run("emulated llm-d-router", func(t *testing.T) { interruptMidTraffic(t, "("+claims+") && router:llm-d-router") })
	t.Run("routers built from source", func(t *testing.T) {
		if err := sim.RoutersBuilt(""); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true: %v", err)
			}
			t.Skip(err)
		}
		// Only the pairs whose routers are built binaries, so the traffic
		// that is interrupted goes through a router process.
		run := interruptMidTraffic(t, "("+claims+") && !router:llm-d-router")
		// The check above could fail for them: the run had router
		// processes when it was interrupted.
		n := 0
		for _, p := range run {
			bin, _, _ := strings.Cut(p.cmdline, " ")
			if base := filepath.Base(bin); base == "vllm-router" || base == "sgl-model-gateway" {
				n++
			}
		}
		if n == 0 {
			t.Errorf("the run had no router process (vllm-router, sgl-model-gateway) when it was interrupted")
		}
		t.Logf("%d router processes were running at the interrupt, and none is left", n)
	})
}

// interruptMidTraffic interrupts make e2e (the specs of filter) in the middle of its traffic, checks what the test's
// doc says, and returns the processes the run had at the interrupt.
func interruptMidTraffic(t *testing.T, filter string) []proc {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	art := t.TempDir()
	cmd := exec.Command("make", "-s", "e2e", "ARTIFACTS="+art, "GINKGO_LABEL_FILTER="+filter)
	cmd.Dir = root
	// Long enough traffic to be interrupted in the middle of it.
	cmd.Env = append(os.Environ(), "E2E_REQUESTS=2400")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	var log strings.Builder
	midTraffic := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		signalled := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := trafficLine.FindStringSubmatch(sc.Text()); m != nil && !signalled && m[1] != "0" && m[1] != m[2] {
				signalled = true
				close(midTraffic)
			}
		}
	}()
	select {
	case <-midTraffic:
	case err := <-exited:
		t.Fatalf("make e2e ended before its traffic did: %v\n%s", err, log.String())
	case <-time.After(10 * time.Minute):
		t.Fatalf("no traffic line within 10 minutes:\n%s", log.String())
	}

	// What the run holds now: its processes and the ports they listen on.
	run := descendants(readProcs(t), pgid)
	listen := listening(t)
	held := map[string]string{}
	for inode := range socketsOf(run) {
		if addr, ok := listen[inode]; ok {
			held[inode] = addr
		}
	}
	if len(run) < 4 || len(held) == 0 {
		t.Fatalf("the run has %d processes and listens on %d ports: the check below could not fail", len(run), len(held))
	}

	start := time.Now()
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Error("an interrupted make e2e exited 0")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("make e2e did not end within 30 s of SIGINT:\n%s", log.String())
	}
	took := time.Since(start)
	t.Logf("ended %s after SIGINT; the run had %d processes listening on %d ports", took.Round(100*time.Millisecond), len(run), len(held))

	r, err := report.Load(filepath.Join(art, report.FileJSON))
	if err != nil {
		t.Fatalf("no partial report: %v\n%s", err, log.String())
	}
	if !r.Interrupted || r.Outcome != report.OutcomeInterrupted || !strings.Contains(r.Headline, "interrupted after") {
		t.Errorf("the report is not marked interrupted: %s (%s)", r.Headline, r.Outcome)
	}
	if _, err := os.Stat(filepath.Join(art, report.FileHTML)); err != nil {
		t.Errorf("no partial HTML report: %v", err)
	}
	if !strings.Contains(log.String(), r.Headline) {
		t.Errorf("the end-of-run summary does not give the headline:\n%s", log.String())
	}

	// Nothing left: every process of the run is gone (a pid that is alive
	// again must be another process: its start time differs) and none of
	// its ports listens.
	time.Sleep(200 * time.Millisecond)
	now := readProcs(t)
	for _, p := range run {
		if q, ok := now[p.pid]; ok && q.start == p.start {
			t.Errorf("process %d of the run is still alive", p.pid)
		}
	}
	listen = listening(t)
	for inode, addr := range held {
		if _, ok := listen[inode]; ok {
			t.Errorf("port %s (socket %s) still listens", addr, inode)
		}
	}
	return run
}
