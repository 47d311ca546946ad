// Command missing prints what this machine lacks to run the apiserver tier
// (netns.Missing), or nothing when it has everything; `make test-apiserver`
// uses it to skip with that one line instead of building the tier.
package main

import (
	"fmt"

	"github.com/gpustack/routing-conformance/test/apiserver/netns"
)

func main() {
	if reason := netns.Missing(); reason != "" {
		fmt.Println(reason)
	}
}
