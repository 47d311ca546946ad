// Command eppdiff is the comparison step of make test-upstream-llmd: it
// reads the reports of the llm-d claims run on the emulated EPP and on
// llm-d-router's built EPP, prints them row by row and fails on a row whose
// results differ without a known difference (internal/eppdiff).
//
//	eppdiff -emulated A/report.json -upstream B/report.json [-out differential.md]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpustack/routing-conformance/internal/eppdiff"
	"github.com/gpustack/routing-conformance/report"
)

func main() {
	emulated := flag.String("emulated", "", "report.json of the run on the emulated EPP")
	upstream := flag.String("upstream", "", "report.json of the run on llm-d-router's built EPP")
	out := flag.String("out", "", "where to write the comparison as Markdown (optional)")
	flag.Parse()
	if *emulated == "" || *upstream == "" {
		fmt.Fprintln(os.Stderr, "eppdiff: -emulated and -upstream name the two runs' report.json")
		os.Exit(2)
	}
	if err := run(*emulated, *upstream, *out); err != nil {
		fmt.Fprintln(os.Stderr, "eppdiff:", err)
		os.Exit(1)
	}
}

func run(emulatedPath, upstreamPath, out string) error {
	em, err := report.Load(emulatedPath)
	if err != nil {
		return err
	}
	up, err := report.Load(upstreamPath)
	if err != nil {
		return err
	}
	c, err := eppdiff.Compare(em, up, eppdiff.Known)
	if err != nil {
		return err
	}
	md := c.Markdown()
	fmt.Print(md)
	if out != "" {
		doc := fmt.Sprintf("# The llm-d claims on the emulated EPP and on llm-d's\n\nemulated: %s\nllm-d's: %s\n\n%s\nKnown differences:\n\n%s",
			em.Headline, up.Headline, md, eppdiff.KnownMarkdown())
		if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
			return err
		}
	}
	if err := c.Err(); err != nil {
		return err
	}
	agree := 0
	for _, r := range c.Rows {
		if r.Agrees() {
			agree++
		}
	}
	fmt.Printf("eppdiff: %d claim × pair rows, %d with the same result on both EPPs, %d known differences\n", len(c.Rows), agree, len(c.Rows)-agree)
	return nil
}
