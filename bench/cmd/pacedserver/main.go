// Command pacedserver is the streaming server of make bench's driver-overhead
// part (bench/overhead.sh): a paced OpenAI chat server in a process of its
// own that records, per request, its own time to the first token and to the
// end (traffic/overhead).
//
//	pacedserver -addr 127.0.0.1:0 -addr-file addr.txt [-first-token 10ms -chunks 8 -gap 2ms]
//
// It writes its bound address to -addr-file once listening and stops on
// SIGINT/SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpustack/routing-conformance/traffic/overhead"
)

func main() {
	shape := overhead.DefaultShape
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the bound host:port here once listening")
	flag.DurationVar(&shape.FirstToken, "first-token", shape.FirstToken, "time to the first token")
	flag.IntVar(&shape.Chunks, "chunks", shape.Chunks, "chunks after the first")
	flag.DurationVar(&shape.Gap, "gap", shape.Gap, "time between chunks")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := overhead.Serve(ctx, *addr, *addrFile, shape); err != nil {
		fmt.Fprintln(os.Stderr, "pacedserver:", err)
		os.Exit(1)
	}
}
