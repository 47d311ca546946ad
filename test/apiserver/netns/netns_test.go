package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestHoldersNamesThisProcess(t *testing.T) {
	ns, err := Inode("self")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ns, "net:[") {
		t.Errorf("Inode(self) = %q", ns)
	}
	self := fmt.Sprint(os.Getpid())
	if !slices.ContainsFunc(Holders(ns), func(h string) bool { return strings.HasPrefix(h, self+" (") }) {
		t.Errorf("Holders(%s) = %v, want pid %s among them", ns, Holders(ns), self)
	}
	if got := Holders("net:[0]"); len(got) != 0 {
		t.Errorf("Holders of a namespace nobody is in = %v", got)
	}
}

func TestListenersSeesALoopbackListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprintf(":%04X", l.Addr().(*net.TCPAddr).Port)
	has := func() bool {
		got, err := Listeners()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(got, func(a string) bool { return strings.HasSuffix(a, port) })
	}
	if !has() {
		t.Errorf("Listeners() misses 127.0.0.1%s", port)
	}
	l.Close()
	if has() {
		t.Errorf("Listeners() still lists 127.0.0.1%s after Close", port)
	}
}

// Each thing the tier needs, when missing, is named in one line.
func TestMissingNamesWhatIsMissing(t *testing.T) {
	root := func() int { return 0 }
	found := func(string) (string, error) { return "/usr/bin/x", nil }
	works := func() ([]byte, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		h    host
		want string
	}{
		{"not root", host{euid: func() int { return 1000 }, lookPath: found, unshare: works}, "needs root"},
		{"no unshare", host{euid: root, lookPath: func(tool string) (string, error) {
			if tool == "unshare" {
				return "", exec.ErrNotFound
			}
			return "/usr/bin/" + tool, nil
		}, unshare: works}, "needs unshare on PATH"},
		{"no ip", host{euid: root, lookPath: func(tool string) (string, error) {
			if tool == "ip" {
				return "", exec.ErrNotFound
			}
			return "/usr/bin/" + tool, nil
		}, unshare: works}, "needs ip on PATH"},
		{"unshare refused", host{euid: root, lookPath: found, unshare: func() ([]byte, error) {
			return []byte("unshare: unshare failed: Operation not permitted\n"), errors.New("exit status 1")
		}}, "`unshare --net true` failed (exit status 1: unshare: unshare failed: Operation not permitted); the tier needs CAP_SYS_ADMIN"},
		{"everything there", host{euid: root, lookPath: found, unshare: works}, ""},
	} {
		got := tc.h.missing()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("%s: Missing() = %q, want one line containing %q", tc.name, got, tc.want)
		}
	}
}
