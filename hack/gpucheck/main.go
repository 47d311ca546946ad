// Command gpucheck fails a nightly run in which no routing spec ran on a GPU.
//
// The suite skips a spec that needs accelerators when the cluster has no
// room for it, and a run made only of such skips passes as far as Ginkgo is
// concerned. A qualification it is not: gpucheck reads the run's report.json
// and exits 1, saying why, unless at least one spec labelled needs:gpu
// passed or failed on a target other than the sim.
//
//	go run ./hack/gpucheck artifacts/report.json
package main

import (
	"fmt"
	"os"

	"github.com/gpustack/routing-conformance/report"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gpucheck <path to report.json>")
		os.Exit(2)
	}
	rep, err := report.Load(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpucheck: %v\n", err)
		os.Exit(1)
	}
	v, err := Check(rep)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpucheck: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	for _, w := range v.Warnings {
		fmt.Println("::warning title=GPU coverage::" + w)
	}
	if !v.OK {
		fmt.Println("::error title=No GPU qualification::" + v.Summary)
		fmt.Fprintln(os.Stderr, "gpucheck: FAIL: "+v.Summary)
		os.Exit(1)
	}
	fmt.Println("gpucheck: " + v.Summary)
}
