package clusters

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpustack/routing-conformance/internal/ansi"
)

// logTailLines is how much of the router's log a failed wait quotes.
const logTailLines = 12

// logTailTimeout bounds reading it: the wait has already failed, and a
// failure must come within its interval, not a log read later (an API
// server that is down must not hold it up).
const logTailTimeout = time.Second

// withRouterLog adds to a failed readiness wait the end of the router
// container's log: the run that exited, when one did (its error), else the
// running one's (what it waits for). A router that exits or never serves
// then says why in the failure itself, not only in the artifacts. A log
// that cannot be read adds nothing.
func withRouterLog(err error, d RouterLogReader) error {
	if err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), logTailTimeout)
	defer cancel()
	pods, perr := d.RouterState(ctx)
	if perr != nil || len(pods) == 0 {
		return err
	}
	previous := false
	for _, p := range pods {
		previous = previous || p.LastExitCode != nil
	}
	text, lerr := d.RouterLogs(ctx, LogOptions{Previous: previous})
	if lerr != nil || strings.TrimSpace(text) == "" {
		return err
	}
	lines := strings.Split(strings.TrimRight(ansi.Strip(text), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	which := "log"
	if previous {
		which = "previous log (the run that exited)"
	}
	return fmt.Errorf("%w\nthe router container's %s, last %d lines:\n  %s", err, which, len(lines), strings.Join(lines, "\n  "))
}
