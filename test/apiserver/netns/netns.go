// Package netns runs a test binary inside a private network namespace, so the
// API server, its webhooks and the Pod addresses of the tier (10.244.0.0/16 on
// the namespace's own loopback) are reachable only from inside it: nothing the
// tier sends can leave the namespace, and nothing outside can reach in.
//
// A package's TestMain calls Main. Run as root with unshare(1) and ip(8) on
// PATH, Main re-executes the test binary under `unshare --net`, brings up lo,
// adds the Pod range to it and runs the tests there; when the child ends it
// checks that no process still holds the namespace. Without root or those
// tools it prints one line saying what is missing, and every test that calls
// Require skips with that line: never a silent pass. Under CI=true a tier
// that cannot run is a failure instead: Main prints the line and exits 1.
package netns

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PodCIDR is the range put on the namespace's loopback: the stack's sim node
// gives Pods addresses from it (sim/apiserver/node's Options.PodCIDR), and the API server proxies to them because they are not loopback
// addresses (proxyutil.IsProxyableIP refuses 127.0.0.0/8 and link-local).
const PodCIDR = "10.244.0.0/16"

// Environment the parent hands the child.
const (
	envInside       = "RC_APISERVER_NETNS_INSIDE"
	envParentNetns  = "RC_APISERVER_NETNS_PARENT"
	envReportNetns  = "RC_APISERVER_NETNS_REPORT"
	setupLoopbackSh = `ip link set lo up && ip addr add ` + PodCIDR + ` dev lo && exec "$@"`
)

// skipReason is set when the tier cannot run here; Require skips with it.
var skipReason string

// Main runs m inside a private network namespace (see the package comment)
// and exits with its status.
func Main(m *testing.M) {
	if os.Getenv(envInside) == "1" {
		if err := checkInside(); err != nil {
			fmt.Fprintf(os.Stderr, "netns: refusing to run the apiserver tier: %v\n", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	if reason := Missing(); reason != "" {
		if InCI() {
			fmt.Printf("%s\n", CIFailure(reason))
			os.Exit(1)
		}
		skipReason = reason
		fmt.Printf("apiserver tier skipped: %s\n", reason)
		os.Exit(m.Run())
	}
	os.Exit(runInChild())
}

// Require skips t, naming what is missing, when the tier cannot run here, and
// fails it when called outside the private namespace some other way.
func Require(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip("apiserver tier skipped: " + skipReason)
	}
	if os.Getenv(envInside) != "1" {
		t.Fatal("netns: this test must run through netns.Main in its package's TestMain")
	}
}

// InCI reports whether this is a CI run (CI=true, as GitHub Actions and the
// project's .ci/run set it), where a tier that cannot run must fail.
func InCI() bool { return os.Getenv("CI") == "true" }

// CIFailure is the line a CI run that cannot run the tier fails with.
func CIFailure(reason string) string {
	return "apiserver tier FAILED: CI=true and the tier cannot run here: " + reason
}

// Missing says what this machine lacks for the tier, or "" when it has all of
// it: root, unshare and ip on PATH, and a working `unshare --net`.
func Missing() string { return host{}.missing() }

// host is what Missing asks of the machine; tests replace each question.
type host struct {
	euid     func() int
	lookPath func(string) (string, error)
	unshare  func() ([]byte, error)
}

func (h host) missing() string {
	if h.euid == nil {
		h.euid = os.Geteuid
	}
	if h.lookPath == nil {
		h.lookPath = exec.LookPath
	}
	if h.unshare == nil {
		h.unshare = func() ([]byte, error) { return exec.Command("unshare", "--net", "true").CombinedOutput() }
	}
	if h.euid() != 0 {
		return "needs root to create a private network namespace (unshare --net); run `make test-apiserver` as root"
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := h.lookPath(tool); err != nil {
			return fmt.Sprintf("needs %s on PATH (util-linux unshare, iproute2 ip) to set up the private network namespace", tool)
		}
	}
	if out, err := h.unshare(); err != nil {
		return fmt.Sprintf("`unshare --net true` failed (%v: %s); the tier needs CAP_SYS_ADMIN to create a network namespace", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// runInChild re-executes this binary in a new network namespace and returns
// its exit status; it fails the run when the namespace outlives the child.
func runInChild() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns: cannot find the test binary: %v\n", err)
		return 1
	}
	parentNS, err := Inode("self")
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns: %v\n", err)
		return 1
	}
	report, err := os.CreateTemp("", "rc-apiserver-netns-*")
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns: %v\n", err)
		return 1
	}
	report.Close()
	defer os.Remove(report.Name())

	args := append([]string{"--net", "--", "/bin/sh", "-c", setupLoopbackSh, "sh", self}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envInside+"=1", envParentNetns+"="+parentNS, envReportNetns+"="+report.Name())
	status := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			fmt.Fprintf(os.Stderr, "netns: running the tests under unshare: %v\n", err)
			return 1
		}
		status = exit.ExitCode()
	}
	childNS, _ := os.ReadFile(report.Name())
	if ns := strings.TrimSpace(string(childNS)); ns != "" {
		if holders := waitReleased(ns, 10*time.Second); len(holders) > 0 {
			fmt.Fprintf(os.Stderr, "netns: the tier's network namespace %s is still held by %s after the tests ended\n", ns, strings.Join(holders, ", "))
			return 1
		}
	}
	return status
}

// checkInside confirms the namespace is private and carries the Pod range
// before any test may send to it, and reports the namespace to the parent.
func checkInside() error {
	self, err := Inode("self")
	if err != nil {
		return err
	}
	if self == os.Getenv(envParentNetns) {
		return fmt.Errorf("still in the parent's network namespace %s", self)
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if lo.Flags&net.FlagUp == 0 {
		return errors.New("lo is down in the private namespace")
	}
	addrs, err := lo.Addrs()
	if err != nil {
		return fmt.Errorf("loopback addresses: %w", err)
	}
	found := false
	for _, a := range addrs {
		if a.String() == PodCIDR {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%s is not on lo (addresses: %v)", PodCIDR, addrs)
	}
	if path := os.Getenv(envReportNetns); path != "" {
		if err := os.WriteFile(path, []byte(self), 0o600); err != nil {
			return fmt.Errorf("report the namespace: %w", err)
		}
	}
	return nil
}

// Inode names the network namespace of a process ("self" or a pid) as the
// kernel does, e.g. "net:[4026532281]".
func Inode(pid string) (string, error) {
	ns, err := os.Readlink(filepath.Join("/proc", pid, "ns", "net"))
	if err != nil {
		return "", fmt.Errorf("network namespace of %s: %w", pid, err)
	}
	return ns, nil
}

// Holders lists the processes ("pid (comm)") whose network namespace is ns.
func Holders(ns string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []string{"/proc unreadable: " + err.Error()}
	}
	var out []string
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		if got, err := Inode(pid); err == nil && got == ns {
			comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
			out = append(out, fmt.Sprintf("%s (%s)", pid, strings.TrimSpace(string(comm))))
		}
	}
	return out
}

// waitReleased polls until no process holds ns or the wait is over; a
// process that is exiting may still show for a moment.
func waitReleased(ns string, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		holders := Holders(ns)
		if len(holders) == 0 || time.Now().After(deadline) {
			return holders
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Listeners lists the TCP sockets listening in this process's network
// namespace (/proc/net/tcp and tcp6, state 0A), as "addr:port" in hex the
// way the kernel prints them; inside the tier's fresh namespace every one of
// them was opened by the tier.
func Listeners() ([]string, error) {
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(file)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && fields[3] == "0A" {
				out = append(out, fields[1])
			}
		}
		file.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
