package netns

import (
	"fmt"
	"net"
	"os"
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
