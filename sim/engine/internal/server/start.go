package server

import (
	"context"
	"errors"
	"strings"
	"time"

	ap "github.com/gpustack/routing-conformance/sim/engine/internal/argparse"
)

// ArgsExit ends a program whose command line did not parse the way Python's
// argparse does, and returns the exit status: help and version text go to
// stdout with status 0, a usage error (usage line plus message) to stderr
// with status 2.
func ArgsExit(err error, stdout, stderr *Lines) int {
	var h *ap.Help
	if errors.As(err, &h) {
		stdout.Print("", strings.TrimSuffix(h.Text, "\n"))
		return 0
	}
	var pe *ap.Error
	if errors.As(err, &pe) {
		stderr.Print("", strings.TrimSuffix(pe.Text(), "\n"))
		return 2
	}
	stderr.Print("", err.Error())
	return 2
}

// LoadModel waits out the simulated model loading (the StartupDelay knob).
// It returns false when ctx ended first: the container was told to stop.
// A delay of 0 returns true at once.
func LoadModel(ctx context.Context, delay time.Duration) bool {
	if delay <= 0 {
		return true
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
