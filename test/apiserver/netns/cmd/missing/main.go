// Command missing prints what this machine lacks to run the apiserver tier
// (netns.Missing), or nothing when it has everything; `make test-apiserver`
// uses it to skip with that one line instead of building the tier. Under
// CI=true it prints the failure line to stderr and exits 1 instead: a CI run
// that skipped the tier must not be green.
package main

import (
	"fmt"
	"os"

	"github.com/gpustack/routing-conformance/test/apiserver/netns"
)

func main() {
	reason := netns.Missing()
	switch {
	case reason == "":
	case netns.InCI():
		fmt.Fprintln(os.Stderr, netns.CIFailure(reason))
		os.Exit(1)
	default:
		fmt.Println(reason)
	}
}
